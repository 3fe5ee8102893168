package accesslog

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// reopen in a write list closes Envoy's end and opens it again, as
// /reopen_logs or an Envoy restart does.
const reopen = "<reopen>"

func TestFIFOLinesReachTheirBackends(t *testing.T) {
	tests := []struct {
		name        string
		writes      []string // {A}, {B}: the sinks' addresses; {closed}: nothing listens
		wantA       string
		wantB       string
		wantInvalid string
	}{
		{
			name:   "JSON string to one backend, JSON object to another",
			writes: []string{`{"address":"{A}","message":"[t] - payments took 3ms\n"}` + "\n", `{"message":{"bytes":12},"address":"{B}"}` + "\n"},
			wantA:  "[t] - payments took 3ms\n", wantB: `{"bytes":12}` + "\n", wantInvalid: "0",
		},
		{
			name:   "legacy and garbage",
			writes: []string{"{A};legacy\n", "garbage\n", "{A};after\n"},
			wantA:  "legacy\nafter\n", wantInvalid: "1",
		},
		{
			name:   "two lines in one write",
			writes: []string{`{"address":"{A}","message":"one\n"}` + "\n" + `{"address":"{B}","message":"two\n"}` + "\n"},
			wantA:  "one\n", wantB: "two\n", wantInvalid: "0",
		},
		{
			name:   "a line split over two writes",
			writes: []string{`{"address":"{A}","mes`, `sage":"split\n"}` + "\n" + "{B};x"},
			wantA:  "split\n", wantInvalid: "0",
		},
		{
			name:   "writer closes and reopens",
			writes: []string{"{A};before\n", reopen, "{A};after\n", reopen, "{B};again\n"},
			wantA:  "before\nafter\n", wantB: "again\n", wantInvalid: "0",
		},
		{
			name:   "a backend that refuses does not hold up the others",
			writes: []string{"{closed};lost\n", "{A};ok\n", "{B};ok\n"},
			wantA:  "ok\n", wantB: "ok\n", wantInvalid: "0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := startSink(t, "127.0.0.1:0"), startSink(t, "127.0.0.1:0")
			s := startStreamer(t, testOptions(t))
			w := openAsEnvoy(t, s.opts.Path)
			fill := strings.NewReplacer("{A}", a.addr, "{B}", b.addr, "{closed}", closedPort(t)).Replace
			for _, chunk := range tt.writes {
				if chunk == reopen {
					w.reopen()
					continue
				}
				w.write(fill(chunk))
				w.awaitRead()
			}
			a.awaitText(tt.wantA)
			b.awaitText(tt.wantB)
			if got := metric(s, `zoneproxy_accesslog_lines_dropped_total{backend="",reason="invalid"}`); got != tt.wantInvalid {
				t.Errorf("invalid drops = %s, want %s", got, tt.wantInvalid)
			}
		})
	}
}

func TestLinesOverOneMebibyteAreDropped(t *testing.T) {
	a := startSink(t, "127.0.0.1:0")
	s := startStreamer(t, testOptions(t))
	w := openAsEnvoy(t, s.opts.Path)
	prefix := a.addr + ";"
	line := func(length int) string { return prefix + strings.Repeat("x", length-len(prefix)) }
	atBound, justOver, farOver := line(maxLineBytes), line(maxLineBytes+1), line(maxLineBytes+200_000)
	w.write(justOver + "\n" + atBound + "\n")
	w.write(farOver[:100])
	w.awaitRead()
	w.write(farOver[100:] + "\n" + prefix + "short\n")
	a.awaitText(atBound[len(prefix):] + "\n" + "short\n")
	for sample, want := range map[string]string{
		`zoneproxy_accesslog_lines_dropped_total{backend="",reason="too_long"}`: "2",
		`zoneproxy_accesslog_lines_dropped_total{backend="",reason="invalid"}`:  "0",
		"zoneproxy_accesslog_lines_read_total":                                  "4",
	} {
		if got := metric(s, sample); got != want {
			t.Errorf("%s = %s, want %s", sample, got, want)
		}
	}
}

func TestInvalidLinesAreNotLoggedOneByOne(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	opts := testOptions(t)
	opts.Log = zap.New(core)
	s := startStreamer(t, opts)
	w := openAsEnvoy(t, s.opts.Path)
	w.write(strings.Repeat("garbage\n", 100))
	await(t, "100 invalid lines counted", func() bool {
		return metric(s, `zoneproxy_accesslog_lines_dropped_total{backend="",reason="invalid"}`) == "100"
	})
	if n := logs.Len(); n != 1 {
		t.Errorf("%d warnings for 100 invalid lines, want 1", n)
	}
}

func TestSinkRestartLosesNoQueuedLine(t *testing.T) {
	a := startSink(t, "127.0.0.1:0")
	s := startStreamer(t, testOptions(t))
	w := openAsEnvoy(t, s.opts.Path)
	connected := fmt.Sprintf(`zoneproxy_accesslog_backend_connected{backend="%s"}`, a.addr)

	w.write(a.addr + ";L1\n")
	a.awaitText("L1\n")
	a.kill()
	await(t, "the backend to show as disconnected", func() bool { return metric(s, connected) == "0" })
	w.write(a.addr + ";L2\n" + a.addr + ";L3\n")
	w.awaitRead()

	restarted := startSink(t, a.addr)
	restarted.awaitText("L2\nL3\n")
	await(t, "the backend to show as connected", func() bool { return metric(s, connected) == "1" })
	w.write(a.addr + ";L4\n")
	restarted.awaitText("L2\nL3\nL4\n")
	if got := metric(s, fmt.Sprintf(`zoneproxy_accesslog_lines_forwarded_total{backend="%s"}`, a.addr)); got != "4" {
		t.Errorf("forwarded = %s, want 4", got)
	}
}

func TestFullQueueDropsTheOldestLines(t *testing.T) {
	tests := []struct {
		name       string
		queueLines int
		queueBytes int
		sizes      []int // payload bytes of lines L1, L2, …
		wantDrops  string
		keep       []int // the lines that reach the backend once it is up
	}{
		{"line bound", 3, 0, []int{100, 100, 100, 100, 100}, "2", []int{3, 4, 5}},
		{"byte bound", 0, 3500, []int{1000, 1000, 1000, 1000, 1000}, "2", []int{3, 4, 5}},
		{"a big line pushes out several small ones", 0, 4000, []int{1000, 1000, 1000, 2500, 1000}, "3", []int{4, 5}},
		{"a line over the byte bound is queued alone", 0, 500, []int{1000, 1000}, "1", []int{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := closedPort(t)
			opts := testOptions(t)
			opts.QueueLines, opts.QueueBytes = tt.queueLines, tt.queueBytes
			s := startStreamer(t, opts)
			w := openAsEnvoy(t, s.opts.Path)
			payload := func(n int) string { // line Ln, sizes[n-1] bytes with its '\n'
				name := fmt.Sprintf("L%d", n)
				return name + strings.Repeat(".", tt.sizes[n-1]-len(name)-1) + "\n"
			}
			for n := 1; n <= len(tt.sizes); n++ {
				w.write(addr + ";" + payload(n))
			}
			var want strings.Builder
			for _, n := range tt.keep {
				want.WriteString(payload(n))
			}
			queueFull := fmt.Sprintf(`zoneproxy_accesslog_lines_dropped_total{backend="%s",reason="queue_full"}`, addr)
			await(t, tt.wantDrops+" lines dropped from the full queue", func() bool { return metric(s, queueFull) == tt.wantDrops })
			startSink(t, addr).awaitText(want.String())
		})
	}
}
