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
