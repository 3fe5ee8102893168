package cli

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The map agrees with zoneproxy's own flags: a shared name is a flag of
// run, an equivalent is one under the other name, and a flag zoneproxy
// does without is none of run's.
func TestKumaDPFlagsAgainstRun(t *testing.T) {
	run := flagNames(findCommand(t, "run"))
	for name, f := range kumaDPFlags {
		switch {
		case f.use == name:
			if !run[name] {
				t.Errorf("kuma-dp's --%s is listed as shared, but run has no such flag", name)
			}
		case f.use != "":
			if !run[f.use] || run[name] {
				t.Errorf("kuma-dp's --%s: run should take --%s and not --%s", name, f.use, name)
			}
		default:
			if run[name] {
				t.Errorf("kuma-dp's --%s is listed as absent, but run takes it", name)
			}
			if !strings.HasPrefix(f.none, "not needed") && !strings.HasPrefix(f.none, "not supported") {
				t.Errorf("kuma-dp's --%s: %q says neither not needed nor not supported", name, f.none)
			}
		}
		if f.short != "" && findCommand(t, "run").Flags().ShorthandLookup(f.short) != nil {
			t.Errorf("kuma-dp's -%s is also zoneproxy's", f.short)
		}
	}
}

var (
	longFlag  = regexp.MustCompile("`(--[a-z0-9-]+)`")
	shortFlag = regexp.MustCompile("`(-[a-z])`")
)

// The migration guide's table lists every kuma-dp flag the CLI knows, and
// says what the CLI says of each.
func TestMigrationGuideTableMatchesTheCLI(t *testing.T) {
	raw, err := os.ReadFile("../../docs/migration-from-kuma-dp.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "| kuma-dp flag |")
	if start < 0 {
		t.Fatal("no kuma-dp flag table in the migration guide")
	}
	table := doc[start:]
	table = table[:strings.Index(table, "\n\n")]

	listed := map[string]bool{}
	for _, row := range strings.Split(table, "\n")[2:] {
		cells := strings.Split(row, " | ")
		if len(cells) < 4 {
			t.Fatalf("row with fewer than four cells: %s", row)
		}
		kuma, zp := cells[0], cells[2]
		for _, m := range shortFlag.FindAllStringSubmatch(kuma, -1) {
			if _, ok := kumaDPByShort(strings.TrimPrefix(m[1], "-")); !ok {
				t.Errorf("the guide lists kuma-dp's %s, the CLI does not know it", m[1])
			}
		}
		for _, m := range longFlag.FindAllStringSubmatch(kuma, -1) {
			name := strings.TrimPrefix(m[1], "--")
			listed[name] = true
			f, ok := kumaDPFlags[name]
			switch {
			case !ok:
				t.Errorf("the guide lists kuma-dp's --%s, the CLI does not know it", name)
			case f.use != "":
				if !strings.Contains(zp, "`--"+f.use+"`") {
					t.Errorf("--%s: the CLI says --%s, the guide says %q", name, f.use, zp)
				}
			default:
				word := strings.TrimSuffix(strings.Join(strings.Fields(f.none)[:2], " "), ":") // "not needed" or "not supported"
				if !strings.HasPrefix(zp, word) {
					t.Errorf("--%s: the CLI says %q, the guide says %q", name, word, zp)
				}
			}
			if f.short != "" && !strings.Contains(kuma, "`-"+f.short+"`") {
				t.Errorf("--%s: the guide does not give its short form -%s", name, f.short)
			}
		}
	}
	for name := range kumaDPFlags {
		if !listed[name] {
			t.Errorf("the guide's table lacks kuma-dp's --%s", name)
		}
	}
}
