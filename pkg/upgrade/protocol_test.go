package upgrade

import (
	"errors"
	"strings"
	"testing"
)

func TestDecideProtocolHandsOverOnlyWhenTheBootstrapChangesIt(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		running, offered, unserv bool
		change                   bool
		words                    string
	}{
		{"2.14 to 3.0: state of the world refused", false, true, true, true, "kuma-cp no longer serves state-of-the-world ADS (Kuma 3.0)"},
		{"3.0 to 2.14: delta served, SotW offered", true, false, false, true, "kuma-cp's bootstrap asks for state-of-the-world ADS (Kuma 2.14) where Envoy speaks delta"},
		{"3.0 on delta, a slow answer", true, true, true, false, ""},
		{"2.14 on SotW, back from an outage", false, false, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DecideProtocol(tc.running, tc.offered, tc.unserv)
			if got.Change != tc.change || got.Words != tc.words {
				t.Errorf("DecideProtocol = %+v, want change %t, words %q", got, tc.change, tc.words)
			}
			if !tc.change {
				return
			}
			for _, w := range []string{got.Handing(), got.Done(), got.Failed(errors.New("boom"))} {
				if !strings.HasPrefix(w, tc.words+"; ") || !strings.Contains(w, "an Envoy started from its new bootstrap") {
					t.Errorf("%q does not say what happened and what zoneproxy does", w)
				}
			}
		})
	}
}
