package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStatsFileHookReplacesPrometheusStatsOnly(t *testing.T) {
	body := "# TYPE envoy_cluster_upstream_rq_total counter\nenvoy_cluster_upstream_rq_total{envoy_cluster_name=\"bench\"} 7\n\n"
	file := filepath.Join(t.TempDir(), "stats.prom")
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, sock, _ := startNoADS(t, []string{"ENVOY_STANDIN_STATS_FILE=" + file})

	for _, path := range []string{"/stats?format=prometheus&text_readouts=&usedonly=", "/stats/prometheus"} {
		if code, got := adminDo(t, sock, "GET", path); code != 200 || got != body {
			t.Errorf("GET %s = %d %q, want the file's content", path, code, got)
		}
	}
	// Other formats still show the stand-in's own stats.
	if code, got := adminDo(t, sock, "GET", "/stats"); code != 200 || !strings.Contains(got, "server.live: ") {
		t.Errorf("GET /stats = %d, no server.live in:\n%.300s", code, got)
	}
}

func TestStatsFileHookNamesTheVariableWhenTheFileIsMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.prom")
	_, stderr, code := runEnvoy(t, []string{"ENVOY_STANDIN_STATS_FILE=" + missing}, "--version")
	if code != 1 || !strings.Contains(stderr, "ENVOY_STANDIN_STATS_FILE") || !strings.Contains(stderr, missing) {
		t.Errorf("exit %d, stderr %q: want 1 and an error naming the variable and the path", code, stderr)
	}
}
