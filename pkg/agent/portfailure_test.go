package agent

import (
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/preflight"
)

// A port in use stays a configuration error (78); an address that is not
// on this host yet (a VIP, a tentative IPv6 address) may come up, so the
// agent exits 1 and is restarted.
func TestPortFailureExitCodes(t *testing.T) {
	busy, err := preflight.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name string
		addr string
		want int
	}{
		{"port in use", busy.Addr().String(), exitcode.Config},
		{"address not on this host", "192.0.2.7:10001", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := preflight.CheckFree(preflight.Port{Flag: "ingress-port", Addr: tc.addr})
			if err == nil {
				t.Fatalf("%s: bound", tc.addr)
			}
			if got := exitcode.Of(portFailure(err)); got != tc.want {
				t.Errorf("exit %d for %v, want %d", got, err, tc.want)
			}
		})
	}
}
