package token

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

func jwt(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","kid":"1","typ":"JWT"}`)) + "." + enc([]byte(claims)) + ".c2ln"
}

func TestCheck(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	cases := []struct {
		name, raw, want string
	}{
		{"mesh-wide token", jwt(`{"Mesh":"payments","exp":1900000000,"nbf":1700000000}`), ""},
		{"workload-bound", jwt(`{"Mesh":"payments","Workload":"zp-egress"}`), ""},
		{"unbound", jwt(`{}`), ""},
		{"expired", jwt(`{"Mesh":"payments","exp":1700000000}`), "token expired at 2023-11-14T22:13:20Z (the clock says 2027-01-15T08:00:00Z)"},
		{"expires this second", jwt(`{"exp":1800000000}`), "expired"},
		{"not yet valid", jwt(`{"Mesh":"payments","nbf":1800000001}`), "not valid before 2027-01-15T08:00:01Z"},
		{"other mesh", jwt(`{"Mesh":"billing"}`), `for mesh "billing"`},
		{"other workload", jwt(`{"Workload":"zp-ingress"}`), `workload "zp-ingress"`},
		{"other name", jwt(`{"Name":"other"}`), `name "other"`},
		{"not a JWT", "garbage", "not a JWT"},
		{"header without alg", base64.RawURLEncoding.EncodeToString([]byte(`{}`)) + ".e30.x", "no alg"},
		{"claims not JSON", jwt(`nope`), "claims"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.raw + "\n")
			if err == nil {
				err = c.Check("payments", "zp-1", "zp-egress")
			}
			if te := c.CheckTime(now); err == nil && te != nil {
				err = te
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), tc.raw) && len(tc.raw) > 8 {
				t.Fatal("error repeats the token")
			}
		})
	}
}
