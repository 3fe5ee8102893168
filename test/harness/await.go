package harness

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// Eventually polls cond until it holds or timeout passes.
var Eventually = testutil.Eventually

// FreePort returns a loopback TCP port nobody listens on right now.
var FreePort = testutil.FreePort

// Readiness is what GET /ready on the agent answers: the status and the
// state word on the body's first line.
func Readiness(port int) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/ready")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 512)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	word, _, _ := strings.Cut(strings.TrimSpace(b.String()), "\n")
	return resp.StatusCode, word
}

// ProcessGone reports whether pid no longer exists (or is a zombie
// waiting to be reaped by someone else).
func ProcessGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] == 'Z'
	}
	return false
}

// Children lists the live (not zombie) pids whose parent is pid.
func Children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) && fields[0] != "Z" {
			out = append(out, child)
		}
	}
	return out
}

// Dial reports whether something accepts TCP connections on addr.
var Dial = testutil.Accepts
