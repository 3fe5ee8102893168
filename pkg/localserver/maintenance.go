package localserver

import (
	"fmt"
	"net/http"
)

// Maintenance is what /drain and /undrain ask of the agent.
type Maintenance struct {
	// Drain starts a maintenance drain, or says why it cannot.
	Drain   func() error
	Undrain func()
}

// HandleMaintenance serves POST /drain and POST /undrain on loopback only,
// like /logging, to root and the agent's own user only (onlyOwner): they
// change what the proxy serves. Both answer at once; /ready then says
// DRAINING, DRAINED, or READY again.
func (s *Server) HandleMaintenance(m Maintenance) {
	s.mux.HandleFunc("/drain", postOnly(func(w http.ResponseWriter) {
		if err := m.Drain(); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintln(w, "draining: follow /ready for DRAINED")
	}))
	s.mux.HandleFunc("/undrain", postOnly(func(w http.ResponseWriter) {
		m.Undrain()
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintln(w, "undraining: follow /ready for READY")
	}))
}

func postOnly(h func(http.ResponseWriter)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed: POST "+r.URL.Path, http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		h(w)
	}
}
