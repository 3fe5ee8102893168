package localserver

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// publicReasons are the health listener's reasons, one fixed one a word:
// a load balancer and anyone on the network reach it, so it tells the
// phase and never a PID, a generation or a control plane's words.
var publicReasons = map[string]string{
	string(state.Starting):               "starting",
	string(state.WaitingForControlPlane): "waiting for the control plane",
	string(state.WaitingForMesh):         "waiting for the mesh",
	string(state.Bootstrapped):           "bootstrapped, Envoy not started yet",
	string(state.EnvoyStarting):          "Envoy is starting",
	string(state.Ready):                  "",
	string(state.NoZoneListener):         "Envoy has no zone listener",
	string(state.Draining):               "draining",
	string(state.Drained):                "drained for maintenance",
	string(state.Terminating):            "stopping",
	string(state.Stopped):                "stopped",
	string(state.Failed):                 "failed",
	state.EnvoyUnreachableWord:           "Envoy's admin API does not answer",
}

// notLiveWord stands for an Envoy state word that is not plain.
const notLiveWord = "ENVOY_NOT_LIVE"

// PublicStatus is what the health listener's /ready answers now: the
// code and word loopback's gives, and the word's fixed reason.
func (s *Server) PublicStatus() (int, string) {
	v := s.tracker.Current().Verdict()
	code := http.StatusServiceUnavailable
	if v.Ready {
		code = http.StatusOK
	}
	reason, known := publicReasons[v.Word]
	word := v.Word
	if !known {
		// ENVOY_<state>, the state as Envoy's admin said it.
		reason = "Envoy is not LIVE"
		if len(word) > 40 || strings.ContainsFunc(word, func(r rune) bool { return (r < 'A' || r > 'Z') && r != '_' }) {
			word = notLiveWord
		}
	}
	if reason == "" {
		return code, word
	}
	return code, word + "\n" + reason
}

// readyOn serves /ready with the answer status gives.
func readyOn(status func(r *http.Request) (int, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache, max-age=0")
		code, body := status(r)
		w.WriteHeader(code)
		fmt.Fprintln(w, body)
	}
}
