package harness

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// EnvoyAdmin asks the admin API of the Envoy whose admin socket is in
// workDir: its status code and trimmed body.
func EnvoyAdmin(workDir, method, path string) (int, string, error) {
	sock := filepath.Join(workDir, "kuma-envoy-admin.sock")
	c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	defer c.CloseIdleConnections()
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
