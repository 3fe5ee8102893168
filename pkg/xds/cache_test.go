package xds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/securedir"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

func TestOpenCache(t *testing.T) {
	tests := []struct {
		name   string
		relay  bool
		noDir  bool
		setup  func(t *testing.T, stateDir string)
		opened bool
		err    string // and exit 78
	}{
		{name: "relay off: no cache", setup: func(*testing.T, string) {}},
		{name: "no state dir: no cache", relay: true, noDir: true},
		{name: "opened", relay: true, setup: func(*testing.T, string) {}, opened: true},
		{name: "a file where the cache dir goes is the configuration's to fix", relay: true, setup: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, lkgcache.SubDir), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, err: "is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stateDir := t.TempDir()
			var d *securedir.Dir
			if !tt.noDir {
				tt.setup(t, stateDir)
				var err error
				if d, err = securedir.Open(stateDir, "--state-dir", false); err != nil {
					t.Fatal(err)
				}
				defer d.Close()
			}
			core, logs := observer.New(zapcore.WarnLevel)
			cfg := &config.Config{XDSRelay: tt.relay, StateDir: stateDir, Mesh: "default", Name: "zp"}
			c, err := OpenCache(d, cfg, zap.New(core))
			defer c.Close()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !exitcode.IsConfig(err) {
					t.Fatalf("err = %v, want a configuration error with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (c != nil) != tt.opened {
				t.Fatalf("opened: %v, want %v", c != nil, tt.opened)
			}
			if n := logs.Len(); n != 0 {
				t.Errorf("warned: %v", logs.All())
			}
			// Nothing cached yet (or no cache): nothing to serve, nothing
			// to flush, no certificate to watch.
			if _, err := c.Servable(filepath.Join(stateDir, SocketName)); err == nil {
				t.Error("an empty cache is servable")
			}
			if err := c.Flush(); err != nil {
				t.Error(err)
			}
			if !c.EarliestNotAfter().IsZero() {
				t.Error("a certificate expiry without a certificate")
			}
			c.KeepBootstrap([]byte("{}"), &Resumption{})
		})
	}
}

// `zoneproxy check` reads the cache under the key run keeps it.
func TestInspectCacheUnderRunsKey(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{XDSRelay: true, StateDir: dir, Mesh: "default", Name: "zp", Role: "egress", CPAddress: "https://cp:5678"}
	c, err := lkgcache.Open(lkgcache.Options{Dir: dir, Identity: CacheIdentity(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	c.SetBootstrap([]byte("{}"), storedUpstream(t, c).Upstream)
	(&Cache{c: c}).Close()
	st := InspectCache(cfg, time.Now())
	if !st.Present || !st.IdentityMatch {
		t.Errorf("%+v, want the cache made for this proxy", st)
	}
	other := *cfg
	other.Name = "another"
	if st := InspectCache(&other, time.Now()); st.IdentityMatch {
		t.Errorf("%+v, made for another proxy", st)
	}
}
