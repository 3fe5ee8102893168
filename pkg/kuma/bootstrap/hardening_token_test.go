package bootstrap

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
)

// A token file the agent cannot read while it waits (being rotated, or
// replaced by a pipe or a device) is retried, at once and without asking
// the control plane, and is Local: never taken for the control plane
// being unreachable (which would serve the cached configuration and say
// so).
func TestUnreadableTokenFileIsLocalAndRetried(t *testing.T) {
	asked := 0
	srv, ca := tlsServer(t, func(w http.ResponseWriter, _ *http.Request) { asked++; respond(200, "{}")(w, nil) })
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, says string
	}{
		{"empty", empty, empty + " is empty (is it being rotated?)"},
		{"missing", filepath.Join(dir, "none"), "cannot read " + filepath.Join(dir, "none") + " (is it being rotated?); retrying: no such file"},
		{"a named pipe", fifo, "cannot read " + fifo + " (is it being rotated?); retrying: it is a named pipe (FIFO), not a regular file"},
		{"/dev/zero", "/dev/zero", "it is a character device, not a regular file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(srv.URL, ca)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			cfg := &config.Config{Mesh: "payments", Role: config.RoleEgress, Name: "zp", DataplaneTokenFile: tc.path}
			f := c.Fetcher(cfg, dir, "", envoy.Version{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = f.Attempt(ctx)
			if ctx.Err() != nil {
				t.Fatal("the attempt blocked")
			}
			if KindOf(err) != Local || !strings.Contains(err.Error(), "--dataplane-token-file: ") || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v (%v), want a Local error saying %q", err, KindOf(err), tc.says)
			}
			if code := exitcode.Of(ExitError(err)); code != exitcode.Runtime {
				t.Errorf("exit %d, want 1", code)
			}
			if asked != 0 {
				t.Errorf("the control plane was asked %d times", asked)
			}
		})
	}
}
