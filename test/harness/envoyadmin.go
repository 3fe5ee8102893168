package harness

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// Envoy's admin sockets in a work dir: the bootstrap's, and the one an
// Envoy handover's even generations use.
var envoyAdminSockets = []string{"kuma-envoy-admin.sock", "zoneproxy-envoy-admin-handover.sock"}

// EnvoyAdmin asks the admin API of the Envoy whose admin socket is in
// workDir (the newest, after Envoy handovers): its status code and
// trimmed body.
func EnvoyAdmin(workDir, method, path string) (int, string, error) {
	socket, newest := filepath.Join(workDir, envoyAdminSockets[0]), time.Time{}
	for _, name := range envoyAdminSockets {
		if fi, err := os.Stat(filepath.Join(workDir, name)); err == nil && fi.ModTime().After(newest) {
			socket, newest = filepath.Join(workDir, name), fi.ModTime()
		}
	}
	c := testutil.UnixHTTP(socket, 2*time.Second)
	req, err := http.NewRequest(method, "http://envoy"+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), err
}
