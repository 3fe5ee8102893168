package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// The flag table and the kuma-dp mapping are derived from the settings'
// declarations: each setting once, under its own name, with its variable.
func TestTablesDerivedFromTheDeclarations(t *testing.T) {
	fs := pflag.NewFlagSet("all", pflag.ContinueOnError)
	var all []config.Key
	for _, s := range config.Settings() {
		all = append(all, s.Key)
	}
	addFlags(fs, all...) // pflag panics on a flag declared twice
	for _, s := range config.Settings() {
		f := fs.Lookup(string(s.Key))
		if f == nil || f.Usage != s.Usage+" (env "+s.Key.Env()+")" || f.DefValue != s.Default && s.Kind != config.KindList {
			t.Errorf("%s: flag %+v", s.Key.Flag(), f)
		}
	}
	shared := 0
	for name, f := range kumaDPFlags {
		if f.use == "" {
			continue
		}
		shared++
		if _, claimed := kumaDPOnly[name]; claimed {
			t.Errorf("kuma-dp's --%s is both --%s and a flag zoneproxy has not", name, f.use)
		}
		if _, ok := config.Lookup(f.use); !ok {
			t.Errorf("kuma-dp's --%s maps to --%s, no setting", name, f.use)
		}
	}
	for kumaDP, want := range map[string]string{"binary-path": "envoy-binary", "config-dir": "work-dir", "work-dir": "work-dir", "drain-time": "drain-time", "admin-port": "admin-port"} {
		if got := kumaDPFlags[kumaDP].use; got != want {
			t.Errorf("kuma-dp's --%s is --%s here, want --%s", kumaDP, got, want)
		}
	}
	if shared != 15 {
		t.Errorf("%d kuma-dp flags zoneproxy has, want 15", shared)
	}
	if len(kumaDPFlags) != len(kumaDPOnly)+shared {
		t.Errorf("%d kuma-dp flags, %d without ours and %d with", len(kumaDPFlags), len(kumaDPOnly), shared)
	}
	if !strings.Contains(kumaDPHint("binary-path"), "--envoy-binary") {
		t.Errorf("hint %q", kumaDPHint("binary-path"))
	}
}

// Help prose spells flags as text: each one it names is a flag of some
// command, so a renamed setting leaves no help naming the old flag.
func TestHelpNamesOnlyFlagsThatExist(t *testing.T) {
	root := NewRootCommand()
	known := map[string]bool{
		"component-log-level": true, "cpuset-threads": true, // Envoy's, named as such
	}
	var commands []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		commands = append(commands, c)
		c.Flags().VisitAll(func(f *pflag.Flag) { known[f.Name] = true })
		c.InheritedFlags().VisitAll(func(f *pflag.Flag) { known[f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	known["help"] = true
	flag := regexp.MustCompile(`--([a-z][a-z-]*[a-z])`)
	for _, c := range commands {
		texts := []string{c.Short, c.Long, c.Example}
		c.Flags().VisitAll(func(f *pflag.Flag) { texts = append(texts, f.Usage) })
		for _, m := range flag.FindAllStringSubmatch(strings.Join(texts, "\n"), -1) {
			if !known[m[1]] {
				t.Errorf("%s --help names --%s, a flag of no command", c.CommandPath(), m[1])
			}
		}
	}
}
