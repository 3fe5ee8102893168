package bench

import (
	"bytes"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/observability/meshmetric"
)

const benchPolicy = `{"observability":{"metrics":{"applications":null,"backends":[{"type":"Prometheus","name":null}],
 "sidecar":{"profiles":{"appendProfiles":[{"name":"%s"}],"exclude":[{"type":"Regex","match":"^envoy_server_.*"}],
 "include":[{"type":"Exact","match":"envoy_server_live"}]},"includeUnused":false},
 "extraLabels":{"kuma.proxy_role":"zone-egress","mesh":"payments","zone":"default"}}}}`

// One scrape of the hijacker minus the socket: parse Envoy's body, apply
// the profile, write the answer with the extra labels, for 50k lines (its
// budget is in docs/benchmarks.md).
func BenchmarkMeshMetricScrape(b *testing.B) {
	body := EnvoyStats(50_000)
	for _, tc := range []struct {
		name, profile string
	}{
		{"basic-text", "Basic"},
		{"all-text", "All"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg, err := meshmetric.Parse([]byte(fmt.Sprintf(benchPolicy, tc.profile)))
			if err != nil {
				b.Fatal(err)
			}
			var out bytes.Buffer
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			for b.Loop() {
				fams, err := cfg.Filter(body)
				if err != nil {
					b.Fatal(err)
				}
				out.Reset()
				if err := meshmetric.WriteText(&out, fams); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time (all threads, GC included) next to ns/op, which
			// a shared machine inflates.
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(strings.Count(body, "\n")), "lines-in")
			b.ReportMetric(float64(bytes.Count(out.Bytes(), []byte("\n"))), "lines-out")
		})
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
