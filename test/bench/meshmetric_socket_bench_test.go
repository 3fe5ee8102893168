package bench

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/observability/meshmetric"
)

// A scrape of the hijacker's socket end to end, in one process: a fake
// Envoy admin serving a 50k-line /stats on a Unix socket, the agent's
// admin client and meshmetric.Server, and a client reading the answer as
// Prometheus would. "direct" is the client reading Envoy's /stats itself;
// the difference is what the agent adds (zpbench measures it across
// processes).
func BenchmarkMeshMetricSocket(b *testing.B) {
	body := EnvoyStats(50_000)
	dir, err := os.MkdirTemp("", "zpb-mm-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	envoySock := filepath.Join(dir, "admin.sock")
	ln, err := net.Listen("unix", envoySock)
	if err != nil {
		b.Fatal(err)
	}
	fake := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		io.WriteString(w, body)
	})}
	go fake.Serve(ln)
	b.Cleanup(func() { fake.Close() })
	admin := envoy.NewAdmin(envoy.AdminAddress{Socket: envoySock})
	b.Cleanup(admin.Close)
	hj, err := meshmetric.Serve(meshmetric.Options{Path: filepath.Join(dir, "mh.sock"), Stats: admin.Stats})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { hj.Close() })

	for _, tc := range []struct{ name, sock, path string }{
		{"direct", envoySock, "/stats?format=prometheus&text_readouts=&usedonly="},
		{"through-hijacker", hj.Path(), "/meshmetric"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", tc.sock)
			}}}
			defer c.CloseIdleConnections()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodGet, "http://localhost"+tc.path, nil)
				req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("%d %v", resp.StatusCode, err)
				}
			}
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}
