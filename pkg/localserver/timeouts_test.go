package localserver

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// A scraper on another host that keeps its connection idle, or asks for
// /metrics and never reads the answer, is let go.
func TestMetricsListenerLetsGoOfIdleAndStalledClients(t *testing.T) {
	idleTimeout, writeTimeout = 200*time.Millisecond, 200*time.Millisecond
	t.Cleanup(func() { idleTimeout, writeTimeout = time.Minute, 30*time.Second })

	loopback, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	extra, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(loopback, state.NewTracker())
	s.ServeMetricsOn(extra)
	handlerDone := make(chan error, 1)
	page := strings.Repeat("zoneproxy_some_metric 1\n", 1<<20) // 24 MB: more than the socket buffers hold
	s.HandleMetrics(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("big") == "" {
			io.WriteString(w, "zoneproxy_ready 0\n")
			return
		}
		_, err := io.WriteString(w, page)
		handlerDone <- err
	}))
	go s.Serve()
	defer s.Shutdown(context.Background())

	// Idle: one request, then nothing; the server closes the connection.
	c, err := net.Dial("tcp", extra.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: 10.0.0.5:9903\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	// Well before ReadTimeout (10 s), which net/http falls back on for
	// idle connections without an IdleTimeout.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("an idle keep-alive connection: read %v, want the server to close it (EOF)", err)
	}

	// Stalled: the handler's write fails instead of blocking for ever.
	c2, err := net.Dial("tcp", extra.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	io.WriteString(c2, "GET /metrics?big=1 HTTP/1.1\r\nHost: 10.0.0.5:9903\r\n\r\n")
	select {
	case err := <-handlerDone:
		if err == nil {
			t.Error("the whole page was written to a client that reads nothing")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler is still writing to a client that reads nothing")
	}
}
