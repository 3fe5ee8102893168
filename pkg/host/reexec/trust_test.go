package reexec

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A program that another user could have replaced (its directory is
// writable by everyone) is not run: the old program keeps serving.
func TestExecRefusesAProgramOthersCanReplace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "zoneproxy")
	if err := os.WriteFile(prog, self, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	assertExecFails(t, prog)
}

// A handover record in a memfd that is not sealed, which another process
// holding it could still change, is refused.
func TestTakeRefusesAnUnsealedRecord(t *testing.T) {
	cases := []struct {
		name  string
		seals int
	}{
		{"no seals", 0},
		{"writable", unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL},
		{"seals can be added", unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fd, err := unix.MemfdCreate("handover", unix.MFD_ALLOW_SEALING)
			if err != nil {
				t.Skip(err)
			}
			b, _ := json.Marshal(manifest{Version: ManifestVersion})
			if _, err := unix.Write(fd, b); err != nil {
				t.Fatal(err)
			}
			if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			if tc.seals != 0 {
				if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, tc.seals); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv(EnvVar, strconv.Itoa(fd))
			h, err := Take()
			if err == nil {
				h.Close()
				t.Fatal("an unsealed record was taken")
			}
			if !strings.Contains(err.Error(), "not a sealed memfd") {
				t.Errorf("got %v", err)
			}
		})
	}
}
