package cli

import (
	"fmt"
	"strings"

	"github.com/hashicorp/go-multierror"
	"github.com/spf13/cobra"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/dataplane"
)

func newRenderCommand() *cobra.Command {
	render := &cobra.Command{
		Use:   "render",
		Short: "Print the resources this zone proxy uses, for review or kumactl apply",
		// Cobra leaves an unknown subcommand of a subcommand to it.
		RunE: func(cmd *cobra.Command, args []string) error {
			names := []string{"dataplane", "meshzoneaddress"}
			if len(args) == 0 {
				return usageError{"render which resource? " + strings.Join(names, " or ")}
			}
			hint := ""
			if best := closest(args[0], names); best != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", best)
			}
			return usageError{fmt.Sprintf("unknown resource %q for %q%s: render %s", args[0], cmd.CommandPath(), hint, strings.Join(names, " or "))}
		},
	}
	dp := &cobra.Command{
		Use:   "dataplane",
		Short: "Print the Dataplane that run registers (YAML)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := prepare(cmd, resourceCheck)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), p.cfg.Dataplane().YAML())
			return nil
		},
	}
	addFlags(dp.Flags(), dataplaneFlags...)

	mza := &cobra.Command{
		Use:   "meshzoneaddress",
		Short: "Print the MeshZoneAddress that tells other zones how to reach this zone ingress",
		Long: `On Universal, other zones find a zone ingress through a MeshZoneAddress
resource that the operator creates (kumactl apply -f). It carries the public
address and port, which differ from --address/--ingress-port behind NAT or a
load balancer.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res dataplane.MeshZoneAddress
			_, err := prepare(cmd, func(cfg *config.Config, src *source) ([]config.Warning, error) {
				return nil, multierror.Append(cfg.ValidateResource(), meshZoneAddress(cfg, src, &res)).ErrorOrNil()
			})
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), res.YAML())
			return nil
		},
	}
	addFlags(mza.Flags(), meshZoneAddressFlags...)

	render.AddCommand(dp, mza)
	return render
}

// meshZoneAddress builds the resource from the zone proxy's settings and
// its own, reporting every problem.
func meshZoneAddress(cfg *config.Config, src *source, res *dataplane.MeshZoneAddress) error {
	var port int
	errs := multierror.Append(nil, src.decode(config.KeyAdvertisedPort, &port))
	switch cfg.Role {
	case config.RoleEgress:
		errs = multierror.Append(errs, config.Problem{Key: config.KeyRole, Message: "a MeshZoneAddress is for zone ingress; use " + config.KeyRole.Flag() + " ingress or combined"})
	case config.RoleIngress, config.RoleCombined:
		*res = dataplane.MeshZoneAddress{Mesh: cfg.Mesh, Name: cfg.Name, Zone: src.text(config.KeyZone),
			Address: src.text(config.KeyAdvertisedAddress), Port: port}
		if res.Address == "" {
			res.Address = cfg.Address
		}
		if res.Port == 0 {
			res.Port = cfg.IngressPort
		}
		for _, fe := range res.Validate() {
			errs = multierror.Append(errs, config.Problem{Key: mzaSettings[fe.Field], Message: fe.Message})
		}
	}
	return errs.ErrorOrNil()
}

// mzaSettings names the setting behind each field of a MeshZoneAddress.
var mzaSettings = map[string]config.Key{
	`labels["kuma.io/zone"]`: config.KeyZone,
	"spec.address":           config.KeyAdvertisedAddress,
	"spec.port":              config.KeyAdvertisedPort,
}

// refuse prints a problem a restart cannot fix (exit 78).
func refuse(cmd *cobra.Command, err error) error {
	fmt.Fprintln(cmd.ErrOrStderr(), "zoneproxy: "+err.Error())
	return reportedError{exitcode.AsConfig(err)}
}
