package relay

import (
	"context"
	"sync"
	"time"
)

// cacheAnswerWait bounds how long a resumed stream waits for Envoy to
// answer the cached responses sent to it: Envoy answers at once, and one
// it has not answered by then is taken as not held.
var cacheAnswerWait = time.Second

// unansweredNonces are, by type, the nonce of the relay's last response
// while Envoy has not answered it (ACK or NACK). Envoy answers the last
// response of a type; an older one it may never answer.
type unansweredNonces struct {
	mu      sync.Mutex
	pending map[string]string // type URL -> nonce
	changed chan struct{}     // closed and replaced at every answer
}

func (u *unansweredNonces) sent(typeURL, nonce string) {
	if nonce == "" {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pending == nil {
		u.pending = map[string]string{}
	}
	u.pending[typeURL] = nonce
}

func (u *unansweredNonces) answered(typeURL, nonce string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if nonce == "" || u.pending[typeURL] != nonce {
		return
	}
	delete(u.pending, typeURL)
	if u.changed != nil {
		close(u.changed)
		u.changed = nil
	}
}

// await returns once every response sent is answered, or after wait;
// false if ctx ended first.
func (u *unansweredNonces) await(ctx context.Context, wait time.Duration) bool {
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	for {
		u.mu.Lock()
		if len(u.pending) == 0 {
			u.mu.Unlock()
			return true
		}
		if u.changed == nil {
			u.changed = make(chan struct{})
		}
		changed := u.changed
		u.mu.Unlock()
		select {
		case <-changed:
		case <-timeout.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
}
