// Package token inspects a Kuma dataplane token without verifying it, so
// that an expired token or one for another mesh fails at start with a clear
// reason instead of as a rejected ADS stream later.
package token

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/zoneproxy/zoneproxy/pkg/config/key"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
)

// Claims are the parts of a dataplane token the agent checks: kuma-cp's
// own claims beside the registered ones (exp, nbf, which may be fractional).
type Claims struct {
	Name     string              `json:"Name"`
	Mesh     string              `json:"Mesh"`
	Workload string              `json:"Workload"`
	Tags     map[string][]string `json:"Tags"`
	jwt.RegisteredClaims
}

// ErrNotJWT is a token that cannot be decoded.
var ErrNotJWT = errors.New("not a JWT")

// Parse decodes a JWT's header and claims without checking the signature
// (only the control plane holds the key). Its errors wrap ErrNotJWT.
func Parse(raw string) (Claims, error) {
	var c Claims
	raw = strings.TrimSpace(raw)
	if strings.ContainsAny(raw, "\r\n\x00") {
		// base64 would skip them, but the token is sent as they are: a
		// header value Envoy and grpc refuse.
		return c, fmt.Errorf("%w: a line break or NUL inside the token (was it wrapped?); write it on one line", ErrNotJWT)
	}
	if strings.Count(raw, ".") != 2 {
		return c, fmt.Errorf("%w (expected three dot-separated parts)", ErrNotJWT)
	}
	// Unverified: only the control plane holds the key. A header without
	// alg, a claim that is not JSON or a fractional exp are the parser's.
	if _, _, err := jwt.NewParser().ParseUnverified(raw, &c); err != nil {
		return c, fmt.Errorf("%w: %w", ErrNotJWT, err)
	}
	return c, nil
}

// LooksLikeJWT: s has a JWT's shape (three base64url segments, the first
// a JSON header), so that it is never echoed, e.g. as a path.
func LooksLikeJWT(s string) bool {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) != 3 {
		return false
	}
	var header map[string]any
	return decodeSegment(parts[0], &header) == nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(seg, "="))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Check returns why the token cannot work for mesh/name/workload and the
// Dataplane's labels, or nil. Empty claims mean "not bound", as on the
// control plane. A tag the control plane itself sets as a label (zone,
// origin) is left for it to judge.
func (c Claims) Check(mesh, name, workload string, labels map[string]string, setByControlPlane func(string) bool) error {
	// Values are quoted where they are shown and given as they would be
	// typed where a fix names them (errtext.Arg): a line break in a claim
	// must not break the message, nor the command it suggests.
	q := func(s string) string { return strconv.Quote(errtext.Value(s)) }
	if c.Mesh != "" && c.Mesh != mesh {
		// Both values are shown, --mesh first: a typo in either is likelier
		// than a deliberate mismatch, and minting a token for a mistyped
		// mesh would only move the failure to the control plane.
		return fmt.Errorf("token is for mesh %s, but %s is %s: one of the two is likely a typo; set %s %s if this proxy serves that mesh, or issue a token for mesh %s",
			q(c.Mesh), key.Mesh.Flag(), q(mesh), key.Mesh.Flag(), errtext.Arg(c.Mesh), errtext.Arg(mesh))
	}
	if c.Name != "" && c.Name != name {
		return fmt.Errorf("token is bound to name %s, but this proxy is %s; set %s %s or issue a token bound to no name", q(c.Name), q(name), key.Name.Flag(), errtext.Arg(c.Name))
	}
	for _, k := range slices.Sorted(maps.Keys(c.Tags)) {
		v, ok := labels[k]
		switch {
		case setByControlPlane != nil && setByControlPlane(k):
		case !ok:
			return fmt.Errorf("token requires the label %s (one of %s), which this proxy does not have; add %s %s=<value> or issue a token without --tag %s", errtext.Arg(k), quoteAll(c.Tags[k]), key.Label.Flag(), errtext.Arg(k), errtext.Arg(k))
		case !slices.Contains(c.Tags[k], v):
			return fmt.Errorf("token allows label %s only as one of %s, but this proxy has %s=%s; change the label or issue a token for it", errtext.Arg(k), quoteAll(c.Tags[k]), errtext.Arg(k), errtext.Arg(v))
		}
	}
	if c.Workload != "" && c.Workload != workload {
		return fmt.Errorf("token is bound to workload %s, but this proxy's workload is %s; set %s %s or issue a token for this workload", q(c.Workload), q(workload), key.Workload.Flag(), errtext.Arg(c.Workload))
	}
	return nil
}

// quoteAll shows a claim's list of values as Go quotes a list, each value
// and the list cut if over-long.
func quoteAll(vs []string) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.Quote(errtext.Value(v))
	}
	return errtext.Value("[" + strings.Join(out, " ") + "]")
}

// TimeError says the token is not valid at the time the local clock gives,
// which may itself be wrong.
type TimeError struct {
	NotYetValid bool      // else expired
	At          time.Time // nbf or exp
	Now         time.Time
}

func (e *TimeError) Error() string {
	if e.NotYetValid {
		return fmt.Sprintf("token is not valid before %s (the clock says %s)", e.At.UTC().Format(time.RFC3339), e.Now.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("token expired at %s (the clock says %s)", e.At.UTC().Format(time.RFC3339), e.Now.UTC().Format(time.RFC3339))
}

// CheckTime returns a *TimeError if the token is not valid at now, or nil.
func (c Claims) CheckTime(now time.Time) *TimeError {
	if c.NotBefore != nil && now.Before(c.NotBefore.Time) {
		return &TimeError{NotYetValid: true, At: c.NotBefore.Time, Now: now}
	}
	if c.ExpiresAt != nil && !now.Before(c.ExpiresAt.Time) {
		return &TimeError{At: c.ExpiresAt.Time, Now: now}
	}
	return nil
}
