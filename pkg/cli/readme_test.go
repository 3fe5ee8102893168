package cli

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The README's command table names every command an operator runs, and
// only those.
func TestReadmeCommandTableMatchesTheCLI(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "| command | what it does |")
	if start < 0 {
		t.Fatal("no command table in the README")
	}
	table := doc[start:]
	table = table[:strings.Index(table, "\n\n")]
	cmdRef := regexp.MustCompile("`zoneproxy ((?:[a-z]+ ?)+)")
	var listed []string
	for _, row := range strings.Split(table, "\n")[2:] {
		first, _, _ := strings.Cut(strings.TrimPrefix(row, "| "), " |")
		for _, m := range cmdRef.FindAllStringSubmatch(first, -1) {
			words := strings.Fields(m[1])
			if words[0] == "completion" {
				words = words[:1] // "completion bash|zsh|fish"
			}
			listed = append(listed, strings.Join(words, " "))
		}
	}
	root := NewRootCommand()
	root.InitDefaultCompletionCmd() // cobra adds it when run
	var want []string
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() || c.Name() == "help" {
			continue
		}
		if subs := available(c); len(subs) > 0 && c.Name() != "completion" {
			for _, s := range subs {
				want = append(want, c.Name()+" "+s.Name())
			}
			continue
		}
		want = append(want, c.Name())
	}
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("the README lists %q, the CLI has %q", listed, want)
	}
}

func available(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			out = append(out, s)
		}
	}
	return out
}

// Every `zoneproxy <command>` the README and the guides name exists, so a
// renamed or removed command cannot linger in them.
func TestDocsNameOnlyRealCommands(t *testing.T) {
	root := NewRootCommand()
	root.InitDefaultCompletionCmd()
	real := map[string]bool{"help": true}
	for _, c := range root.Commands() {
		real[c.Name()] = true
	}
	cmdRef := regexp.MustCompile("`zoneproxy ([a-z][a-z-]*)")
	for _, doc := range []string{"../../README.md", "../../docs/operator-guide.md", "../../docs/migration-from-kuma-dp.md"} {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cmdRef.FindAllStringSubmatch(string(raw), -1) {
			if !real[m[1]] {
				t.Errorf("%s names `zoneproxy %s`, which is no command", doc, m[1])
			}
		}
	}
}

// The migration guide says what replaces kuma-dp's drain: SIGUSR2 and the
// drain and undrain commands.
func TestMigrationGuideCoversDrain(t *testing.T) {
	raw, err := os.ReadFile("../../docs/migration-from-kuma-dp.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SIGUSR2", "`zoneproxy drain`", "`zoneproxy undrain`", "kuma-dp drain"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the migration guide does not mention %s", want)
		}
	}
}
