package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
)

// drain, undrain and reload --instance find the unit's agent where it
// holds its lock: in the work dir systemd gives the unit, not the one a
// root shell would derive from the proxy's name.
func TestMaintenanceByInstanceUsesTheUnitsWorkDir(t *testing.T) {
	t.Setenv("RUNTIME_DIRECTORY", "")
	t.Setenv("STATE_DIRECTORY", "")
	origShow := showUnit
	defer func() { showUnit = origShow }()
	showUnit = func(context.Context, string) ([]byte, error) { return []byte(unitShown), nil }
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "payments-egress.yaml"), []byte("mesh: payments\nrole: egress\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, newCmd := range []func() *cobra.Command{newDrainCommand, newUndrainCommand, newReloadCommand} {
		cmd := newCmd()
		t.Run(cmd.Name(), func(t *testing.T) {
			if err := cmd.ParseFlags([]string{"--instance-dir", dir, "--instance", "payments-egress"}); err != nil {
				t.Fatal(err)
			}
			p, _, err := prepareRunning(cmd)
			if err != nil {
				t.Fatal(err)
			}
			if want := "/run/zoneproxy/payments-egress"; p.cfg.WorkDir != want {
				t.Errorf("work dir %q, want the unit's %q", p.cfg.WorkDir, want)
			}
		})
	}
}
