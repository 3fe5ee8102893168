package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// What the restart, hung, egress-stop and upgrade figures share: a zone egress
// with a warm cache, registered with the control plane, and the agent's
// /ready and /status read whole.

// statusClient reads the agent's readiness port.
var statusClient = &http.Client{Timeout: 2 * time.Second}

// readyFull is GET /ready: the code and the whole body, trimmed.
func readyFull(port int) (int, string) {
	resp, err := statusClient.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/ready")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// agentCP is the controlPlane part of the agent's GET /status.
type agentCP struct {
	Phase        string `json:"phase"`
	ControlPlane struct {
		State string `json:"state"`
	} `json:"controlPlane"`
}

// agentGenerations is what /status says of the agent's and Envoy's
// generations: a reload counts the agent's, a handover Envoy's.
type agentGenerations struct {
	Generation int `json:"generation"`
	Envoy      *struct {
		PID        int   `json:"pid"`
		Generation int64 `json:"generation"`
	} `json:"envoy"`
}

// getStatus decodes the agent's GET /status into v.
func getStatus(port int, v any) error {
	resp, err := statusClient.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/status")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/status answered %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// statusOf is the agent's phase and what it says kuma-cp makes of it.
func statusOf(port int) string {
	var st agentCP
	if getStatus(port, &st) != nil {
		return "?"
	}
	return st.Phase + "/" + st.ControlPlane.State
}

// isCached says whether a 200 /ready body says Envoy runs on the cache.
func isCached(body string) bool { return strings.Contains(body, "cached") }

// awaitServing polls /ready every 2 ms until 200 and returns when the
// answer came and its body; it gives up when the agent exits.
func awaitServing(a *agent, port int, timeout time.Duration) (time.Time, string, error) {
	var code int
	var body string
	var at time.Time
	ok := waitUntil(timeout, 2*time.Millisecond, func() bool {
		code, body = readyFull(port)
		at = time.Now()
		return code == 200 || a.exited()
	})
	if !ok || code != 200 {
		return at, body, fmt.Errorf("/ready answered %d %q after %s:\n%s", code, body, time.Since(a.execAt).Round(time.Millisecond), a.tail(15))
	}
	return at, body, nil
}

// awaitLive polls /ready every 5 ms until 200 without "cached": Envoy
// runs on the control plane's configuration.
func awaitLive(a *agent, port int, timeout time.Duration) (time.Time, error) {
	var code int
	var body string
	var at time.Time
	ok := waitUntil(timeout, 5*time.Millisecond, func() bool {
		code, body = readyFull(port)
		at = time.Now()
		return (code == 200 && !isCached(body)) || a.exited()
	})
	if !ok || code != 200 || isCached(body) {
		return at, fmt.Errorf("not on the live configuration after %s: /ready %d %q:\n%s", timeout, code, body, a.tail(15))
	}
	return at, nil
}

// cacheFile is the last-known-good cache in p's state dir.
func cacheFile(p proxy) string { return filepath.Join(p.stateDir, lkgcache.SubDir, lkgcache.FileName) }

// nodeID is the xDS node id kuma-cp keys streams by.
func nodeID(p proxy) string { return p.mesh + "." + p.name }

// startWarm starts p (named, egress) and waits until it is READY on the
// control plane's configuration, its cache is on disk, and kuma-cp has
// its Dataplane and counts it connected.
func (b *bed) startWarm(p proxy) (*agent, error) {
	a, err := b.start(b.zoneproxy, p)
	if err != nil {
		return nil, err
	}
	if _, err := awaitLive(a, p.readiness, 20*time.Second); err != nil {
		a.kill()
		return nil, err
	}
	if !waitUntil(10*time.Second, 10*time.Millisecond, func() bool {
		_, err := os.Stat(cacheFile(p))
		_, present := b.cp.Dataplane(p.mesh, p.name)
		return err == nil && present && b.cp.NodeStream(nodeID(p)).Connected
	}) {
		a.kill()
		return nil, fmt.Errorf("%s: no cache file %s, or kuma-cp has no connected Dataplane, 10 s after READY", p.name, cacheFile(p))
	}
	return a, nil
}

// envoyLaunches reads the wrapper's stamp: one line per Envoy launched by
// this agent, the pid first.
func envoyLaunches(stamp string) []int {
	b, err := os.ReadFile(stamp)
	if err != nil {
		return nil
	}
	var pids []int
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			if pid, err := strconv.Atoi(f[0]); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// withStamp is p with its own stamp file, for one run of its agent.
func withStamp(p proxy, suffix string) proxy {
	p.stamp = p.stamp + "-" + suffix
	return p
}
