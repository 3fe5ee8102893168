package meshmetric_test

import (
	"bytes"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/observability/meshmetric"
	"github.com/zoneproxy/zoneproxy/test/bench"
)

const benchPolicy = `{"observability":{"metrics":{"backends":[{"type":"Prometheus","name":null}],
 "sidecar":{"profiles":{"appendProfiles":[{"name":"%s"}],"exclude":[{"type":"Regex","match":"^envoy_server_.*"}],
 "include":[{"type":"Exact","match":"envoy_server_live"}]},"includeUnused":false},
 "extraLabels":{"kuma.proxy_role":"zone-egress","mesh":"payments","zone":"default"}}}}`

// What one scrape costs without the socket: parse Envoy's /stats body,
// apply the profile, write the answer with the extra labels (its budget is
// in docs/benchmarks.md), and the parse alone,
// which the OTLP push also does. Two pages: 50k lines, and a zone proxy
// with 1,000 clusters (140 lines each: 140k lines, 14.7 MB).
func BenchmarkScrape(b *testing.B) {
	for _, page := range []struct {
		name  string
		lines int
	}{{"50k-lines", 50_000}, {"1000-clusters", 1_000 * 140}} {
		body := bench.EnvoyStats(page.lines)
		b.Run(page.name, func(b *testing.B) {
			for _, profile := range []string{"Basic", "All"} {
				b.Run(strings.ToLower(profile), func(b *testing.B) {
					cfg, err := meshmetric.Parse([]byte(fmt.Sprintf(benchPolicy, profile)))
					if err != nil {
						b.Fatal(err)
					}
					var out bytes.Buffer
					run(b, body, func() {
						fams, err := cfg.Filter(body)
						if err != nil {
							b.Fatal(err)
						}
						out.Reset()
						if err := meshmetric.WriteText(&out, fams); err != nil {
							b.Fatal(err)
						}
					})
					b.ReportMetric(float64(bytes.Count(out.Bytes(), []byte("\n"))), "lines-out")
				})
			}
			b.Run("parse", func(b *testing.B) {
				run(b, body, func() {
					if _, err := meshmetric.ParseText(body); err != nil {
						b.Fatal(err)
					}
				})
			})
		})
	}
}

// run reports the process's CPU time per op (GC included) beside ns/op,
// which a shared machine inflates.
func run(b *testing.B, body string, op func()) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
