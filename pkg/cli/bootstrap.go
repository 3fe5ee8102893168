package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/preflight"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
)

func newBootstrapCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Fetch and print the Envoy bootstrap the control plane generates (token redacted)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := prepare(cmd, fullCheck)
			if err != nil {
				return err
			}
			cfg := p.cfg
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			found, err := preflight.Envoy(ctx, cfg.EnvoyBinary, cfg.StateDir)
			if err != nil {
				return refuse(cmd, err)
			}
			got, err := fetchOnce(ctx, cfg, found.Version)
			var setup setupError
			switch {
			case errors.As(err, &setup):
				return refuse(cmd, setup.err)
			case err != nil:
				fmt.Fprintln(cmd.ErrOrStderr(), "zoneproxy: "+err.Error())
				if bootstrap.KindOf(err) == bootstrap.Permanent {
					err = exitcode.AsConfig(err)
				}
				return reportedError{err} // 1 for what run would retry
			}
			out := string(got.doc)
			if got.token != "" {
				out = strings.ReplaceAll(out, got.token, "REDACTED")
			}
			fmt.Fprint(cmd.OutOrStdout(), out)
			return nil
		},
	}
	addFlags(cmd.Flags(), bootstrapFlags...)
	return cmd
}

// fetched is one bootstrap and the token its request carried (for
// redaction).
type fetched struct {
	doc   []byte
	token string
}

// setupError is a problem found before any request was made (the CA file,
// a temporary work dir): nothing was asked of the control plane.
type setupError struct{ err error }

func (e setupError) Error() string { return e.err.Error() }
func (e setupError) Unwrap() error { return e.err }

// fetchOnce makes the one /bootstrap attempt `bootstrap` and `check` need,
// as run's first would: in cfg's work dir, or a temporary one removed after.
func fetchOnce(ctx context.Context, cfg *config.Config, ev envoy.Version) (fetched, error) {
	workDir := cfg.WorkDir
	if workDir == "" {
		tmp, err := os.MkdirTemp("", "zoneproxy-")
		if err != nil {
			return fetched{}, setupError{err}
		}
		defer os.RemoveAll(tmp)
		workDir = tmp
	}
	f, err := bootstrap.NewFetcher(cfg, workDir, "", ev)
	if err != nil {
		return fetched{}, setupError{err}
	}
	defer f.Close()
	actx, cancel := context.WithTimeout(ctx, bootstrap.AttemptTimeout)
	defer cancel()
	doc, err := f.Attempt(actx)
	return fetched{doc: doc, token: f.Token()}, err
}
