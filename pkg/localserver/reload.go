package localserver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Reload is what POST /reload asks of the agent: check the new program and
// ready the handover (an error says why not), then exec, which replaces
// the agent and returns only if that failed.
type Reload func() (exec func() error, err error)

// HandleReload serves POST /reload on loopback only, to root and the
// agent's own user only (onlyOwner), like /drain. It answers 202 once the
// new program is checked, before the agent replaces itself, whose new
// program then answers on the same listener; 409 with the reason when the
// reload is refused, 501 when this agent cannot reload to the new program
// at all (a restart can). GET /status then shows the new generation.
func (s *Server) HandleReload(reload Reload) {
	s.mux.HandleFunc("/reload", postOnly(func(w http.ResponseWriter) {
		exec, err := reload()
		var impossible interface{ CannotReload() bool }
		switch {
		case errors.As(err, &impossible) && impossible.CannotReload():
			http.Error(w, err.Error(), http.StatusNotImplemented)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		// Whole before the exec, which closes the connection: its length
		// is known, so the client reads an ended body.
		const msg = "reloading: follow /status for the next generation\n"
		w.Header().Set("Connection", "close")
		w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, msg)
		if f, ok := w.(http.Flusher); ok {
			f.Flush() // answered before the program is replaced
		}
		_ = exec() // logged and counted by the agent; /status says how it went
	}))
}

// SetGenerations adds gen's answer, when not "", as the last line of
// /ready: after a reload, the agent's and Envoy's generations. Call it
// before Serve.
func (s *Server) SetGenerations(gen func() string) { s.generations = gen }

func (s *Server) generationLine() string {
	if s.generations == nil {
		return ""
	}
	if g := s.generations(); g != "" {
		return "\n" + g
	}
	return ""
}
