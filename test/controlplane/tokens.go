package controlplane

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// signingKeyID is the kid of the one key the test CP trusts for every mesh,
// like a key in dpServer.authn.dpProxy.dpToken.validator.publicKeys.
const signingKeyID = "1"

const defaultTokenValidity = 10 * 365 * 24 * time.Hour

// tokenHint is what kuma-cp with a memory store appends to token errors.
const tokenHint = "kuma-cp runs with an in-memory database and its state isn't preserved between restarts. Keep in mind that an in-memory database cannot be used with multiple instances of the control plane"

// TokenRequest describes a dataplane token. Empty Name/Workload/Tags leave
// the token unbound on that field.
type TokenRequest struct {
	Mesh     string
	Name     string
	Workload string
	ValidFor time.Duration // 0 = 10 years, like kuma-cp
	Tags     map[string][]string
}

// dataplaneClaims has kuma's claim keys (Go field names as JSON keys).
type dataplaneClaims struct {
	Name     string
	Mesh     string
	Tags     map[string][]string
	Type     string
	Workload string
	jwt.RegisteredClaims
}

type tokenIssuer struct {
	key *rsa.PrivateKey
}

func newTokenIssuer() (*tokenIssuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	return &tokenIssuer{key: key}, nil
}

func (t *tokenIssuer) issue(r TokenRequest, now time.Time) (string, error) {
	if r.Mesh == "" {
		return "", errors.New("mesh: cannot be empty")
	}
	if r.ValidFor < 0 {
		return "", errors.New("validFor: is invalid: must not be negative")
	}
	validFor := r.ValidFor
	if validFor == 0 {
		validFor = defaultTokenValidity
	}
	tags := map[string][]string{}
	for k, v := range r.Tags {
		tags[k] = append([]string(nil), v...)
	}
	claims := dataplaneClaims{
		Name:     r.Name,
		Mesh:     r.Mesh,
		Tags:     tags,
		Type:     "",
		Workload: r.Workload,
		RegisteredClaims: jwt.RegisteredClaims{
			ID:        newUUID(),
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			// kuma adds 5 s to the requested validity.
			ExpiresAt: jwt.NewNumericDate(now.Add(validFor + 5*time.Second)),
		},
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = signingKeyID
	return tok.SignedString(t.key)
}

// parse verifies signature, kid and time claims. Errors carry the same
// wording as kuma-cp's token validator.
func (t *tokenIssuer) parse(raw string) (*dataplaneClaims, error) {
	claims := &dataplaneClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(tok *jwt.Token) (any, error) {
		kid, ok := tok.Header["kid"].(string)
		if !ok || kid == "" {
			return nil, errors.New("kid header not found")
		}
		if kid != signingKeyID {
			return nil, fmt.Errorf("there is no signing key with KID %s", kid)
		}
		return &t.key.PublicKey, nil
	}, jwt.WithValidMethods([]string{jwt.SigningMethodRS256.Alg()}))
	if err != nil {
		return nil, fmt.Errorf("could not parse token. %s: %w", tokenHint, err)
	}
	return claims, nil
}

// authorize checks the claims against the Dataplane like kuma's universal
// authenticator: name, mesh, tags (as labels), then workload.
func authorizeClaims(c *dataplaneClaims, dp *dataplane) error {
	if c.Name != "" && c.Name != dp.Name {
		return fmt.Errorf("proxy name from requestor: %s is different than in token: %s", dp.Name, c.Name)
	}
	if c.Mesh != "" && c.Mesh != dp.Mesh {
		return fmt.Errorf("proxy mesh from requestor: %s is different than in token: %s", dp.Mesh, c.Mesh)
	}
	keys := make([]string, 0, len(c.Tags))
	for k := range c.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		allowed := c.Tags[k]
		v, ok := dp.Labels[k]
		if !ok {
			return fmt.Errorf("dataplane has no tag %q required by the token", k)
		}
		found := false
		for _, a := range allowed {
			if a == v {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("dataplane contains tag %q with value %q which is not allowed with this token. Allowed values in token are %q", k, v, allowed)
		}
	}
	if c.Workload != "" {
		if w := dp.Labels[workloadLabel]; w != c.Workload {
			return fmt.Errorf("dataplane workload %q is not allowed with this token. Allowed workload in token is %q", w, c.Workload)
		}
	}
	return nil
}

func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
