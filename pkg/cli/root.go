// Package cli holds zoneproxy's commands. It turns flags, environment and
// the config file into one config.Config and hands it to a library; no
// business logic lives here.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/version"
)

// NewRootCommand builds the whole command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "zoneproxy",
		Short: "Run a mesh-scoped Kuma zone proxy (zone ingress, zone egress, or both) with Envoy",
		Long: `zoneproxy runs a Kuma zone proxy for one mesh on a VM or bare-metal host.

It registers a mesh-scoped Dataplane with ZoneIngress and/or ZoneEgress
listeners, fetches Envoy's bootstrap from the zone control plane (waiting
while the mesh does not exist yet), starts and supervises Envoy, reports
readiness, and drains Envoy gracefully on stop.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError{"which command? " + strings.Join(commandNames(cmd), ", ")}
		},
	}
	// --version is `zoneproxy version`, as other tools have it.
	root.Version = version.Version
	root.SetVersionTemplate(version.String() + "\n")
	root.AddCommand(newRunCommand(), newCheckCommand(), newStatusCommand(), newDrainCommand(), newUndrainCommand(), newReloadCommand(), newRenderCommand(), newBootstrapCommand(), newVersionCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit",
		Long: `Print the version and commit. -o json prints an object with the stable
fields version, commit, buildDate, kuma and envoy.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "", "text":
				fmt.Fprintln(cmd.OutOrStdout(), version.String())
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(version.Current())
			default:
				return usageError{fmt.Sprintf("--output %q: use text or json", output)}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

// Main runs the command line and returns the process exit code.
func Main(args []string, stderr io.Writer) int {
	root := NewRootCommand()
	root.SetArgs(args)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitcode.OK
	}
	if errors.As(err, new(reportedError)) {
		return exitcode.Of(err) // a code given around the report counts
	}
	// The rest is cobra's complaint, or ours, about the command line.
	fmt.Fprint(stderr, describeUsage(cmd, args, err))
	return exitUsage
}

// commandNames are the commands an operator runs.
func commandNames(root *cobra.Command) []string {
	var out []string
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() && c.Name() != "help" && c.Name() != "completion" {
			out = append(out, c.Name())
		}
	}
	return out
}

// reportedError was already written out; Main only maps its exit code.
type reportedError struct{ err error }

func (e reportedError) Error() string { return e.err.Error() }
func (e reportedError) Unwrap() error { return e.err }
