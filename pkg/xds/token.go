package xds

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	kumatoken "github.com/zoneproxy/zoneproxy/pkg/kuma/token"
)

// Token is the dataplane token the relay sends with each new upstream
// stream (Options.Token is its Read), and the one sent last, which Envoy's
// output is redacted of.
type Token struct {
	Inline string // --dataplane-token
	File   string // --dataplane-token-file; read anew for each stream
	// Expiry, if set, is told the expiry of each token read or set: zero
	// for one that is not a JWT or has none.
	Expiry func(time.Time)

	mu   sync.Mutex
	last string
}

// Read reads the token for a new upstream stream, so a rotated file
// applies at the next reconnect whatever the control plane's setting. The
// file is read as at start (token.ReadFile: a regular file of a token's
// size only, never blocking on a pipe nor reading a device); what goes
// wrong while the agent runs is a rotation under way, retried by the
// relay, which reports it as local: the control plane was not asked.
func (t *Token) Read() (string, error) {
	tok := strings.TrimSpace(t.Inline)
	if path := t.File; path != "" {
		var err error
		if tok, err = kumatoken.ReadFile(path); err != nil {
			if errors.Is(err, kumatoken.ErrEmpty) {
				return "", fmt.Errorf("%s %s is empty (is it being rotated?)", config.KeyDataplaneTokenFile.Flag(), errtext.Value(path))
			}
			return "", fmt.Errorf("%s: cannot read %s (is it being rotated?): %w", config.KeyDataplaneTokenFile.Flag(), errtext.Value(path), errtext.PathCause(err))
		}
	}
	t.Set(tok)
	return tok, nil
}

// Set keeps tok as the token last sent (the bootstrap request's).
func (t *Token) Set(tok string) {
	t.mu.Lock()
	t.last = tok
	t.mu.Unlock()
	if t.Expiry == nil {
		return
	}
	var exp time.Time
	if c, err := kumatoken.Parse(tok); err == nil && c.ExpiresAt != nil {
		exp = c.ExpiresAt.Time
	}
	t.Expiry(exp)
}

// Last is the token last sent, "" before the first.
func (t *Token) Last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}
