package upgrade

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Requests bring the Envoy handovers asked for (POST /envoy/handover, a
// reload's Refresh) to the agent's serve loop, which does them one at a
// time.
type Requests struct {
	once sync.Once
	ch   chan Request
}

// Request is one handover asked for.
type Request struct {
	// Reason says why, in the log.
	Reason string
	// Bootstrap, when set, is the new Envoy's (rewritten) bootstrap in
	// place of the running one's.
	Bootstrap []byte
	done      chan error
}

// C is where the serve loop takes requests up.
func (q *Requests) C() <-chan Request {
	q.once.Do(func() { q.ch = make(chan Request) })
	return q.ch
}

// Ask hands a request to the serve loop and waits for its outcome.
func (q *Requests) Ask(ctx context.Context, reason string, bootstrap []byte) error {
	q.C()
	req := Request{Reason: reason, Bootstrap: bootstrap, done: make(chan error, 1)}
	select {
	case q.ch <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Answer gives the one who asked the outcome.
func (r Request) Answer(err error) { r.done <- err }

// Handler is POST /envoy/handover on the loopback endpoint: ask for a
// handover now (ask) and answer once the new Envoy serves (serving says
// which) or with why not (409). It waits up to within, past the server's
// timeouts (30 s to write, 10 s to read, after which the request's
// context ends), which are shorter than a handover may be.
func Handler(within time.Duration, ask func(ctx context.Context) error, serving func() string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed: POST "+r.URL.Path, http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rc := http.NewResponseController(w)
		until := time.Now().Add(within)
		if err := errors.Join(rc.SetReadDeadline(until), rc.SetWriteDeadline(until)); err != nil {
			http.Error(w, "cannot wait for the handover on this connection: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if err := ask(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		fmt.Fprintln(w, serving())
	})
}
