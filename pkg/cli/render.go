package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/zoneproxy/zoneproxy/pkg/agent"
	"github.com/zoneproxy/zoneproxy/pkg/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/dataplane"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/preflight"
)

func newRenderCommand() *cobra.Command {
	render := &cobra.Command{
		Use:   "render",
		Short: "Print the resources this zone proxy uses, for review or kumactl apply",
	}
	dp := &cobra.Command{
		Use:   "dataplane",
		Short: "Print the Dataplane that run registers (YAML)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, _, err := prepare(cmd, resourceCheck)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), cfg.Dataplane().YAML())
			return nil
		},
	}
	addRunFlags(dp.Flags())

	mza := &cobra.Command{
		Use:   "meshzoneaddress",
		Short: "Print the MeshZoneAddress that tells other zones how to reach this zone ingress",
		Long: `On Universal, other zones find a zone ingress through a MeshZoneAddress
resource that the operator creates (kumactl apply -f). It carries the public
address and port, which differ from --address/--ingress-port behind NAT or a
load balancer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr, _ := cmd.Flags().GetString("advertised-address")
			port, _ := cmd.Flags().GetInt("advertised-port")
			zone, _ := cmd.Flags().GetString("zone")
			cfg, _, _, err := prepare(cmd, resourceCheck)
			if err != nil {
				return err
			}
			if !cfg.Role.HasIngress() {
				return usageError(cmd, "--role: a MeshZoneAddress is for zone ingress; use --role ingress or combined")
			}
			if addr == "" {
				addr = cfg.Address
			}
			if port == 0 {
				port = cfg.IngressPort
			}
			res := dataplane.MeshZoneAddress{Mesh: cfg.Mesh, Name: cfg.Name, Zone: zone, Address: addr, Port: port}
			if errs := res.Validate(); len(errs) > 0 {
				return usageError(cmd, errs.Error())
			}
			fmt.Fprint(cmd.OutOrStdout(), res.YAML())
			return nil
		},
	}
	addRunFlags(mza.Flags())
	mza.Flags().String("advertised-address", "", "address other zones reach this ingress on (default --address)")
	mza.Flags().Int("advertised-port", 0, "port other zones reach this ingress on (default --ingress-port)")
	mza.Flags().String("zone", "", "zone name for the kuma.io/zone label (required)")
	_ = mza.MarkFlagRequired("zone")

	render.AddCommand(dp, mza)
	return render
}

func usageError(cmd *cobra.Command, msg string) error {
	fmt.Fprintln(cmd.ErrOrStderr(), "zoneproxy: "+msg)
	return reportedError{exitcode.AsConfig(fmt.Errorf("%s", msg))}
}

func newBootstrapCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Fetch and print the Envoy bootstrap the control plane generates (token redacted)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, _, err := prepare(cmd, fullCheck)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			_, ev, _, err := preflight.Envoy(ctx, cfg.EnvoyBinary)
			if err != nil {
				return usageError(cmd, err.Error())
			}
			workDir := cfg.WorkDir
			if workDir == "" {
				tmp, err := os.MkdirTemp("", "zoneproxy-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				workDir = tmp
			}
			f, err := agent.NewFetcher(cfg, workDir, "", ev)
			if err != nil {
				return usageError(cmd, err.Error())
			}
			defer f.Close()
			doc, err := f.Attempt(ctx)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "zoneproxy: "+err.Error())
				if bootstrap.KindOf(err) == bootstrap.Permanent {
					err = exitcode.AsConfig(err)
				}
				return reportedError{err} // 1 for what run would retry
			}
			out := string(doc)
			if tok := f.Token(); tok != "" {
				out = strings.ReplaceAll(out, tok, "REDACTED")
			}
			fmt.Fprint(cmd.OutOrStdout(), out)
			return nil
		},
	}
	addRunFlags(cmd.Flags())
	return cmd
}
