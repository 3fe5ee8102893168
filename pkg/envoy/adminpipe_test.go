package envoy

import (
	"strings"
	"testing"
)

func TestWithAdminPipe(t *testing.T) {
	for _, tc := range []struct {
		name, doc, wantErr string
	}{
		{name: "pipe moved, the rest kept", doc: `{"admin":{"address":{"pipe":{"path":"/w/kuma-envoy-admin.sock","mode":384}}},"node":{"id":"n"},"x":12345678901234567890}`},
		{name: "TCP admin", doc: `{"admin":{"address":{"socketAddress":{"address":"127.0.0.1","portValue":9901}}}}`, wantErr: "not on a Unix socket"},
		{name: "no admin", doc: `{"node":{}}`, wantErr: "not on a Unix socket"},
		{name: "not JSON", doc: `admin: {}`, wantErr: "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, addr, err := WithAdminPipe([]byte(tc.doc), "/w/second.sock")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if addr.Socket != "/w/second.sock" {
				t.Errorf("address %+v", addr)
			}
			read, err := AdminFromBootstrap(out)
			if err != nil || read != addr {
				t.Errorf("the copy's admin reads %+v, %v", read, err)
			}
			for _, kept := range []string{`"mode":384`, `"node":{"id":"n"}`, `12345678901234567890`} {
				if !strings.Contains(string(out), kept) {
					t.Errorf("%s lost in %s", kept, out)
				}
			}
		})
	}
}
