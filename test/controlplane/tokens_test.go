package controlplane

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func decodeSegment(t *testing.T, seg string) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestIssueTokenShape(t *testing.T) {
	iss, err := newTokenIssuer()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	tok, err := iss.issue(TokenRequest{Mesh: "payments", Workload: "zp-egress", ValidFor: 24 * time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("%d segments", len(parts))
	}
	rawHeader, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if string(rawHeader) != `{"alg":"RS256","kid":"1","typ":"JWT"}` {
		t.Errorf("header %s", rawHeader)
	}
	rawClaims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if !strings.HasPrefix(string(rawClaims), `{"Name":"","Mesh":"payments","Tags":{},"Type":"","Workload":"zp-egress","exp":`) {
		t.Errorf("claims %s", rawClaims)
	}
	c := decodeSegment(t, parts[1])
	if c["exp"].(float64) != float64(now.Add(24*time.Hour+5*time.Second).Unix()) {
		t.Errorf("exp %v", c["exp"])
	}
	if c["nbf"].(float64) != float64(now.Unix()) || c["iat"].(float64) != float64(now.Unix()) {
		t.Errorf("nbf/iat %v %v", c["nbf"], c["iat"])
	}
	if jti, _ := c["jti"].(string); len(jti) != 36 {
		t.Errorf("jti %q", jti)
	}

	def, _ := iss.issue(TokenRequest{Mesh: "m"}, now)
	dc := decodeSegment(t, strings.Split(def, ".")[1])
	if want := float64(now.Add(10*365*24*time.Hour + 5*time.Second).Unix()); dc["exp"].(float64) != want {
		t.Errorf("default exp %v, want %v", dc["exp"], want)
	}
	if _, err := iss.issue(TokenRequest{}, now); err == nil || err.Error() != "mesh: cannot be empty" {
		t.Errorf("empty mesh: %v", err)
	}
}

func TestTokenVerification(t *testing.T) {
	iss, err := newTokenIssuer()
	if err != nil {
		t.Fatal(err)
	}
	other, err := newTokenIssuer()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	dp := &dataplane{Mesh: "payments", Name: "zp-egress-1", Labels: map[string]string{"kuma.io/workload": "zp-egress", "team": "a"}}
	sign := func(i *tokenIssuer, r TokenRequest, at time.Time) string {
		tok, err := i.issue(r, at)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	hs, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"Mesh": "payments"}).SignedString([]byte("k"))
	noKid := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"Mesh": "payments"})
	noKidTok, _ := noKid.SignedString(iss.key)
	wrongKid := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"Mesh": "payments"})
	wrongKid.Header["kid"] = "2"
	wrongKidTok, _ := wrongKid.SignedString(iss.key)

	parsePrefix := "could not parse token. " + tokenHint + ": "
	rows := []struct {
		name  string
		token string
		want  string // "" = accepted
	}{
		{"mesh-wide token", sign(iss, TokenRequest{Mesh: "payments"}, now), ""},
		{"fully bound token", sign(iss, TokenRequest{Mesh: "payments", Name: "zp-egress-1", Workload: "zp-egress", Tags: map[string][]string{"team": {"b", "a"}}}, now), ""},
		{"garbage", "garbage", parsePrefix + "token is malformed: token contains an invalid number of segments"},
		{"empty", "", parsePrefix + "token is malformed: token contains an invalid number of segments"},
		{"other key", sign(other, TokenRequest{Mesh: "payments"}, now), parsePrefix + "token signature is invalid: crypto/rsa: verification error"},
		{"HS256", hs, parsePrefix + "token signature is invalid: signing method HS256 is invalid"},
		{"no kid", noKidTok, parsePrefix + "token is unverifiable: error while executing keyfunc: kid header not found"},
		{"unknown kid", wrongKidTok, parsePrefix + "token is unverifiable: error while executing keyfunc: there is no signing key with KID 2"},
		{"expired", sign(iss, TokenRequest{Mesh: "payments", ValidFor: time.Second}, now.Add(-time.Hour)), parsePrefix + "token has invalid claims: token is expired"},
		{"not yet valid", sign(iss, TokenRequest{Mesh: "payments"}, now.Add(time.Hour)), parsePrefix + "token has invalid claims: token is not valid yet"},
		{"wrong mesh", sign(iss, TokenRequest{Mesh: "billing"}, now), "proxy mesh from requestor: payments is different than in token: billing"},
		{"wrong name", sign(iss, TokenRequest{Mesh: "payments", Name: "zp-ingress-1"}, now), "proxy name from requestor: zp-egress-1 is different than in token: zp-ingress-1"},
		{"wrong workload", sign(iss, TokenRequest{Mesh: "payments", Workload: "zp-ingress"}, now), `dataplane workload "zp-egress" is not allowed with this token. Allowed workload in token is "zp-ingress"`},
		{"tag value not allowed", sign(iss, TokenRequest{Mesh: "payments", Tags: map[string][]string{"team": {"b"}}}, now), `dataplane contains tag "team" with value "a" which is not allowed with this token. Allowed values in token are ["b"]`},
		{"tag missing", sign(iss, TokenRequest{Mesh: "payments", Tags: map[string][]string{"zone": {"z"}}}, now), `dataplane has no tag "zone" required by the token`},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			claims, err := iss.parse(r.token)
			if err == nil {
				err = authorizeClaims(claims, dp)
			}
			switch {
			case r.want == "" && err != nil:
				t.Errorf("rejected: %v", err)
			case r.want != "" && err == nil:
				t.Errorf("accepted, want %q", r.want)
			case r.want != "" && !strings.HasPrefix(err.Error(), r.want):
				t.Errorf("error %q\nwant prefix %q", err, r.want)
			}
		})
	}
}
