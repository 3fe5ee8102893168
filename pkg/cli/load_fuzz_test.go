package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// FuzzConfigFile feeds arbitrary bytes as a --config file: loading and
// validating must report problems, never panic.
func FuzzConfigFile(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/configs/*.yaml")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("mesh: [1, 2]\nrole: {a: b}\nlabel: 7\ndrain-time: 1e400\n"))
	f.Add([]byte("\x00\xff"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		addFlags(fs, runFlags...)
		if err := fs.Parse([]string{"--config", path}); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := loadConfig(fs)
		if err != nil {
			return
		}
		cfg.Complete(config.Host{Hostname: "vm"})
		_, _ = cfg.Validate(time.Now())
	})
}
