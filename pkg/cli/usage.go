package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// exitUsage is EX_USAGE (sysexits.h): the command line itself is wrong
// (an unknown flag or command, a missing or extra argument).
const exitUsage = 64

// usageError is a command line zoneproxy cannot run.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// describeUsage explains a command line cobra refused. An unknown flag is
// reported with every other unknown flag in args, each with what to use
// instead, so that a kuma-dp command line is translated in one go.
func describeUsage(cmd *cobra.Command, args []string, err error) string {
	var b strings.Builder
	var notExist *pflag.NotExistError
	if errors.As(err, &notExist) {
		for _, flag := range unknownFlags(cmd, args) {
			fmt.Fprintf(&b, "zoneproxy: unknown flag %s%s\n", flag, flagHint(cmd, flag))
		}
	}
	if b.Len() == 0 {
		fmt.Fprintf(&b, "zoneproxy: %s\n", strings.TrimSpace(err.Error()))
	}
	fmt.Fprintf(&b, "Run '%s --help' for usage.\n", cmd.CommandPath())
	return b.String()
}

// unknownFlags lists the flags in args that cmd does not take. It skips
// the values of flags, known ones and kuma-dp's, as pflag would.
func unknownFlags(cmd *cobra.Command, args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name, inline := strings.TrimLeft(a, "-"), false
		if n, _, ok := strings.Cut(name, "="); ok {
			name, inline = n, true
		}
		short := !strings.HasPrefix(a, "--")
		if short && len(name) > 1 {
			inline = true // -dvalue
			name = name[:1]
		}
		var f *pflag.Flag
		if short {
			f = cmd.Flags().ShorthandLookup(name)
		} else {
			f = cmd.Flags().Lookup(name)
		}
		takesValue := f != nil && f.NoOptDefVal == ""
		if f == nil {
			flag := "--" + name
			if short {
				flag = "-" + name
				if long, ok := kumaDPByShort(name); ok {
					name = long
				}
			}
			out = append(out, flag)
			if kd, ok := kumaDPFlags[name]; ok {
				takesValue = !kd.noValue
			} else {
				takesValue = i+1 < len(args) && !strings.HasPrefix(args[i+1], "-")
			}
		}
		if takesValue && !inline {
			i++
		}
	}
	return out
}

// flagHint says what to use instead of flag (as typed, with dashes).
func flagHint(cmd *cobra.Command, flag string) string {
	name := strings.TrimLeft(flag, "-")
	if !strings.HasPrefix(flag, "--") {
		long, ok := kumaDPByShort(name)
		if !ok {
			return ""
		}
		return fmt.Sprintf(" (kuma-dp's --%s): %s", long, strings.TrimPrefix(kumaDPHint(long), "kuma-dp's --"+long+" is "))
	}
	if hint := kumaDPHint(name); hint != "" {
		return ": " + hint
	}
	if others := commandsWithFlag(cmd.Root(), name); len(others) > 0 {
		return fmt.Sprintf(": a flag of %s, not of %s (%s and the config key %s are read by every command)",
			joinAnd(others), cmd.CommandPath(), envName(name), name)
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if best := closest(name, names); best != "" {
		return fmt.Sprintf(" (did you mean --%s?)", best)
	}
	return ""
}

// commandsWithFlag lists the commands under root that have flag name.
func commandsWithFlag(root *cobra.Command, name string) []string {
	var out []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c.Flags().Lookup(name) != nil && c != root {
			out = append(out, c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// noArgs refuses arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Sprintf("%s takes no arguments, got %q", cmd.CommandPath(), strings.Join(args, " "))}
	}
	return nil
}

// joinAnd lists words as "a, b and c".
func joinAnd(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
