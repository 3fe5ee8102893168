package main

import (
	"net"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// kumaTCPMessage is the default TCP format kuma-cp renders for a zone
// proxy, %KUMA_*% already expanded (kuma-observability.md §1.2).
const kumaTCPMessage = "[%START_TIME%] %RESPONSE_FLAGS% payments 127.0.0.1(unknown)->%UPSTREAM_HOST%(unknown) took %DURATION%ms, sent %BYTES_SENT% bytes, received: %BYTES_RECEIVED% bytes\n"

func testContext() *logContext {
	start := time.Date(2026, 3, 4, 5, 6, 7, 891_000_000, time.UTC)
	return &logContext{
		start:    start,
		end:      start.Add(1500 * time.Millisecond),
		bytesIn:  12,
		bytesOut: 0,
		connID:   7,
		local:    &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 10002},
		remote:   &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000},
		logType:  "TcpConnectionEnd",
		cluster:  "kri_extsvc_payments_default__httpbin_80",
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJSONFormatLikeEnvoy(t *testing.T) {
	tests := []struct {
		name      string
		format    map[string]any
		omitEmpty bool
		want      string
	}{
		{
			name:   "kuma TCP default: a string message with the newline escaped, keys sorted",
			format: map[string]any{"message": kumaTCPMessage, "address": "127.0.0.1:5000"},
			want:   `{"address":"127.0.0.1:5000","message":"[2026-03-04T05:06:07.891Z] - payments 127.0.0.1(unknown)->-(unknown) took 1500ms, sent 0 bytes, received: 12 bytes\n"}` + "\n",
		},
		{
			name: "kuma TCP JSON: a lone command keeps its type, nested keys sorted",
			format: map[string]any{"address": "127.0.0.1:5001",
				"message": map[string]any{"start": "%START_TIME%", "mesh": "payments", "bytes": "%BYTES_RECEIVED%"}},
			want: `{"address":"127.0.0.1:5001","message":{"bytes":12,"mesh":"payments","start":"2026-03-04T05:06:07.891Z"}}` + "\n",
		},
		{
			name:   "absent lone value is null, absent inside text is -",
			format: map[string]any{"a": "%UPSTREAM_HOST%", "b": "to %UPSTREAM_HOST%"},
			want:   `{"a":null,"b":"to -"}` + "\n",
		},
		{
			name:      "omit_empty_values drops absent fields",
			format:    map[string]any{"a": "%UPSTREAM_HOST%", "b": "x"},
			omitEmpty: true,
			want:      `{"b":"x"}` + "\n",
		},
		{
			name:   "no HTML escaping, control characters escaped",
			format: map[string]any{"k": "<a&b>\t\"q\"\\"},
			want:   `{"k":"<a&b>\t\"q\"\\"}` + "\n",
		},
		{
			name:   "numbers, bools and lists",
			format: map[string]any{"n": 1.5, "b": true, "l": []any{"%CONNECTION_ID%", "x"}},
			want:   `{"b":true,"l":[7,"x"],"n":1.5}` + "\n",
		},
		{
			name:   "%% is a literal percent",
			format: map[string]any{"p": "100%% of %ACCESS_LOG_TYPE%"},
			want:   `{"p":"100% of TcpConnectionEnd"}` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := newFormatter(&corev3.SubstitutionFormatString{
				Format:          &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: mustStruct(t, tt.format)},
				OmitEmptyValues: tt.omitEmpty,
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.format(testContext()); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestTextFormatLikeEnvoy(t *testing.T) {
	tests := []struct {
		name   string
		format string
		want   string
	}{
		{"kuma default message", kumaTCPMessage, "[2026-03-04T05:06:07.891Z] - payments 127.0.0.1(unknown)->-(unknown) took 1500ms, sent 0 bytes, received: 12 bytes\n"},
		{"addresses", "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% %DOWNSTREAM_LOCAL_PORT% %UPSTREAM_CLUSTER%", "127.0.0.1 10002 kri_extsvc_payments_default__httpbin_80"},
		{"start time with a format", "%START_TIME(%Y/%m/%d %H:%M:%S.%3f)%", "2026/03/04 05:06:07.891"},
		{"truncated header, absent", "%REQ(USER-AGENT):3%|", "-|"},
		{"known to Envoy, unknown to the stand-in", "%REQUESTED_SERVER_NAME%", "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := newFormatter(&corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{
				TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: tt.format}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.format(testContext()); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFormatErrorsLikeEnvoy(t *testing.T) {
	tests := []struct {
		format, want string
	}{
		{"%NOT_A_COMMAND%", "Not supported field in StreamInfo: NOT_A_COMMAND"},
		{"50% off", "Incorrect configuration: 50% off. Couldn't find valid command at position 2"},
		{"%REQ%", "REQ requires parameters"},
		{"%DURATION(x)%", "DURATION does not have parameters"},
		{"%REQ(A?B?C)%", "More than 1 alternative header specified in token: A?B?C"},
	}
	for _, tt := range tests {
		_, err := parseFormat(tt.format)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want %q", tt.format, err, tt.want)
		}
	}
}
