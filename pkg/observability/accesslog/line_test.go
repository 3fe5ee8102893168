package accesslog

import (
	"testing"
)

func TestLinesAreForwardedAsKumaDPSendsThem(t *testing.T) {
	tests := []struct {
		name     string
		line     string
		wantAddr string
		want     string // "" means dropped
	}{
		{"string message verbatim", `{"address":"127.0.0.1:5000","message":"[t] took 3ms\n"}`, "127.0.0.1:5000", "[t] took 3ms\n"},
		{"string message gets no newline added", `{"address":"127.0.0.1:5000","message":"no newline"}`, "127.0.0.1:5000", "no newline"},
		{"string message unescaped", `{"address":"127.0.0.1:5000","message":"a\"b\\c\u00e9\n"}`, "127.0.0.1:5000", "a\"b\\cé\n"},
		{"object sorted, compact, HTML-escaped, newline added",
			`{"message":{"mesh":"payments", "html":"<a&b>","bytes":12},"address":"127.0.0.1:5001"}`,
			"127.0.0.1:5001", `{"bytes":12,"html":"\u003ca\u0026b\u003e","mesh":"payments"}` + "\n"},
		{"nested object keys sorted too", `{"address":"127.0.0.1:5001","message":{"b":{"z":1,"a":[true,null]},"a":"x"}}`,
			"127.0.0.1:5001", `{"a":"x","b":{"a":[true,null],"z":1}}` + "\n"},
		{"object keeps an integer's digits", `{"address":"127.0.0.1:5001","message":{"n":12345678901234567890}}`,
			"127.0.0.1:5001", `{"n":12345678901234567890}` + "\n"},
		{"hostname address", `{"address":"logstash.example:5000","message":"x\n"}`, "logstash.example:5000", "x\n"},
		{"IPv6 address", `{"address":"[::1]:5000","message":"x\n"}`, "[::1]:5000", "x\n"},
		{"legacy: all after the first ';' plus the line's newline", `127.0.0.1:5000;legacy;with;semicolons`, "127.0.0.1:5000", "legacy;with;semicolons\n"},
		{"legacy with an empty message", `127.0.0.1:5000;`, "127.0.0.1:5000", "\n"},
		{"garbage", `garbage`, "", ""},
		{"empty line", ``, "", ""},
		{"legacy with a bad address", `not an address;text`, "", ""},
		{"legacy with port 0", `127.0.0.1:0;text`, "", ""},
		{"JSON null", `null`, "", ""},
		{"JSON without message", `{"address":"127.0.0.1:5000"}`, "", ""},
		{"JSON number message", `{"address":"127.0.0.1:5000","message":12}`, "", ""},
		{"JSON without address", `{"message":"x\n"}`, "", ""},
		{"JSON with a port out of range", `{"address":"127.0.0.1:70000","message":"x\n"}`, "", ""},
		{"broken JSON falls back to legacy and fails there", `{"address":"127.0.0.1:5000","message":"x;y"`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, payload, ok := parseLine([]byte(tt.line))
			if tt.want == "" {
				if ok {
					t.Fatalf("parsed %q as %q for %q; want it dropped", tt.line, payload, addr)
				}
				return
			}
			if !ok || addr != tt.wantAddr || string(payload) != tt.want {
				t.Fatalf("got ok=%v %q → %q, want %q → %q", ok, addr, payload, tt.wantAddr, tt.want)
			}
		})
	}
}
