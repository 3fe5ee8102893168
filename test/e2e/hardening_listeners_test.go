package e2e

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// A flood of unfinished 1 MB headers on --health-address (1,000 clients,
// all on 127.0.0.1, each for at most floodFor) no longer grows the agent
// by hundreds of MB: its headers are capped, its connections too. And
// loopback /ready, which zoneproxy's commands and systemd's checks ask,
// answers all the while: its cap is its own.
func TestHardeningAHeaderFloodOnTheHealthListenerIsBounded(t *testing.T) {
	healthAddr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	_, p, agent := readyEgress(t, nil, "--health-address", healthAddr)
	before := peakRSS(t, agent.PID())

	const clients, headerBytes, floodFor = 1000, 1 << 20, 20 * time.Second
	pad := []byte("GET /ready HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + strings.Repeat("a", headerBytes))
	var (
		wg             sync.WaitGroup
		dialed, failed atomic.Int64
		connsMu        sync.Mutex
		conns          []net.Conn
	)
	end := time.Now().Add(floodFor)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", healthAddr, 10*time.Second)
			if err != nil {
				failed.Add(1)
				return
			}
			dialed.Add(1)
			connsMu.Lock()
			conns = append(conns, c)
			connsMu.Unlock()
			// A small send buffer keeps the flood in the agent, not in
			// this host's kernel.
			_ = c.(*net.TCPConn).SetWriteBuffer(64 << 10)
			_ = c.SetWriteDeadline(end)
			_, _ = c.Write(pad) // never the blank line that ends a header
		}()
	}
	defer func() {
		connsMu.Lock()
		defer connsMu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()

	// During the flood, loopback /ready answers.
	harness.Eventually(t, promptly, "every client connected or gave up", func() bool { return dialed.Load()+failed.Load() == clients })
	asked := time.Now()
	code, body := loopbackReady(t, p.Readiness)
	if code != 200 || !strings.HasPrefix(body, "READY") {
		t.Errorf("loopback /ready during the flood: %d %q, want 200 READY", code, body)
	}
	t.Logf("loopback /ready during the flood answered %d in %v", code, time.Since(asked).Round(time.Millisecond))
	wg.Wait()

	after := peakRSS(t, agent.PID())
	t.Logf("%d clients (%d could not connect) x unfinished %d-byte headers: agent peak RSS %d MiB before, %d MiB after",
		clients, failed.Load(), headerBytes, before>>20, after>>20)
	if grew := after - before; grew > 100<<20 {
		t.Errorf("the flood grew the agent by %d MiB (from %d MiB), want less than 100 MiB", grew>>20, before>>20)
	}
	if agent.Exited() {
		t.Fatalf("the agent exited during the flood\n%s", agent.Output())
	}
}

// loopbackReady is GET /ready on the loopback port, waiting long enough
// for a loaded machine.
func loopbackReady(t *testing.T, port int) (int, string) {
	t.Helper()
	c := http.Client{Timeout: promptly}
	resp, err := c.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/ready")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
