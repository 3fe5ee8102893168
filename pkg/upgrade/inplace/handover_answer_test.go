package inplace

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
)

// POST /envoy/handover answers with the outcome even when the handover
// outlasts the server's read and write timeouts (here 300 ms, on the
// agent's endpoint 10 s and 30 s; a handover may take a minute and more).
func TestHandoverAnswersAfterTheServersTimeouts(t *testing.T) {
	const serverTimeout, handoverTakes = 300 * time.Millisecond, 1500 * time.Millisecond
	for _, tc := range []struct {
		name   string
		result error
		code   int
		says   string
	}{
		{"it succeeds", nil, http.StatusOK, "Envoy generation 2 serves (pid 4242); the old one drains"},
		{"it fails", errTestHandover, http.StatusConflict, "the new Envoy never turned LIVE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newHost(&config.Config{Role: config.RoleEgress, Address: "127.0.0.1", EgressPort: 10002}, nil)
			a.serving.Store(true)
			a.sup.Started(supervise.Current{Proc: newFakeProc()})
			go func() {
				req := <-a.Requests()
				<-time.After(handoverTakes) // a slow handover, the subject of the test
				a.Started(upgrade.Place{Generation: 2, Slot: upgrade.SlotB}, nil)
				req.Answer(tc.result)
			}()
			srv := httptest.NewUnstartedServer(a.Handler())
			srv.Config.ReadTimeout, srv.Config.WriteTimeout = serverTimeout, serverTimeout
			srv.Start()
			defer srv.Close()

			client := http.Client{Timeout: 30 * time.Second}
			resp, err := client.Post(srv.URL+"/envoy/handover", "", nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.says) {
				t.Errorf("got %d %q, want %d saying %q", resp.StatusCode, body, tc.code, tc.says)
			}
		})
	}
}

var errTestHandover = errors.New("Envoy handover failed; the old Envoy (pid 4242) keeps serving: the new Envoy never turned LIVE")
