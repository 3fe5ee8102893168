package harness

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// EnvoyAdmin asks the admin API of the Envoy whose admin socket is in
// workDir: its status code and trimmed body.
func EnvoyAdmin(workDir, method, path string) (int, string, error) {
	c := testutil.UnixHTTP(filepath.Join(workDir, "kuma-envoy-admin.sock"), 2*time.Second)
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
