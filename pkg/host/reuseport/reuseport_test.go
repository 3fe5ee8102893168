package reuseport

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		name       string
		proc       fstest.MapFS
		migrates   bool
		err        bool
		warningHas []string
	}{
		{name: "on", proc: procWith("1\n"), migrates: true},
		{name: "off", proc: procWith("0\n"), warningHas: []string{"is 0", "reset", "sysctl -w net.ipv4.tcp_migrate_req=1", SnippetPath}},
		{name: "kernel before 5.14", proc: fstest.MapFS{"sys/net/ipv4/tcp_fastopen": {Data: []byte("1\n")}}, warningHas: []string{"Linux 5.14", "reset"}},
		{name: "unreadable", proc: fstest.MapFS{sysctlPath: {Mode: fs.ModeDir}}, err: true, warningHas: []string{"cannot read", "sysctl net.ipv4.tcp_migrate_req"}},
		{name: "unexpected value", proc: procWith("2\n"), err: true, warningHas: []string{`"2"`, "sysctl -w net.ipv4.tcp_migrate_req=1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := check(tt.proc)
			if v.Migrates != tt.migrates || (v.Err != nil) != tt.err {
				t.Fatalf("got %+v", v)
			}
			if tt.migrates && v.Warning != "" {
				t.Fatalf("a warning although queued clients migrate: %q", v.Warning)
			}
			for _, want := range tt.warningHas {
				if !strings.Contains(v.Warning, want) {
					t.Errorf("warning %q lacks %q", v.Warning, want)
				}
			}
		})
	}
}

func procWith(value string) fstest.MapFS {
	return fstest.MapFS{sysctlPath: {Data: []byte(value)}}
}
