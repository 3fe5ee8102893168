package relay

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// The state-of-the-world handover: as with delta, the control plane sees
// one stream and none of the relay's nonces. Every SotW response is the
// whole set, so the catch-up at the switch is the serving Envoy's whole
// current set at its version, unchanged resources included: a resource
// missing from it is one a SotW Envoy removes.
func TestStateOfTheWorldHandoverMovesTheOneStreamToTheNewEnvoy(t *testing.T) {
	p := newPKI(t)
	cp := startScripted(t, p, func() *discoveryv3.DiscoveryRequest { return &discoveryv3.DiscoveryRequest{} })
	r := startRelay(t, p, cp.addr, staticToken("tok"), nil)
	ack := func(c *envoyClient, resp *discoveryv3.DiscoveryResponse) {
		c.send(&discoveryv3.DiscoveryRequest{TypeUrl: clusterType, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()})
	}

	old := dialEnvoy(t, r, sotwMethod)
	old.send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: clusterType})
	cp.nextRequest(t)
	cp.push <- mustMarshal(t, sotwResponse(t, "1", listener(t, "a", 0), listener(t, "b", 0), listener(t, "c", 0)))
	ack(old, old.recvSotw())
	if got := cp.nextRequest(t); got.GetResponseNonce() != "1" || got.GetVersionInfo() != "1" {
		t.Fatalf("ACK %v", got)
	}
	awaitHeld(t, r, "a,b,c")

	r.BeginHandover(notThisProcess)
	defer r.EndHandover()
	next := dialEnvoy(t, r, sotwMethod)
	next.send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: clusterType})
	first := next.recvSotw()
	if got := sotwNames(t, first); got != "a,b,c" || first.GetVersionInfo() != "1" || !strings.HasPrefix(first.GetNonce(), relayNoncePrefix) {
		t.Fatalf("the new Envoy got %s at version %q (nonce %q), want a,b,c at 1 from the relay", got, first.GetVersionInfo(), first.GetNonce())
	}
	ack(next, first)

	// During the overlap the control plane keeps a, changes b, drops c and
	// adds d: only the serving Envoy hears of it.
	changedB := listener(t, "b", 7)
	cp.push <- mustMarshal(t, sotwResponse(t, "2", listener(t, "a", 0), changedB, listener(t, "d", 0)))
	ack(old, old.recvSotw())
	if got := cp.nextRequest(t); got.GetResponseNonce() != "2" {
		t.Fatalf("the control plane got %v, want the serving Envoy's ACK of 2", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.CompleteHandover(ctx); err != nil {
		t.Fatal(err)
	}
	caught := next.recvSotw()
	if got := sotwNames(t, caught); got != "a,b,d" || caught.GetVersionInfo() != "2" || !strings.HasPrefix(caught.GetNonce(), relayNoncePrefix) {
		t.Fatalf("catch-up %s at version %q (nonce %q), want the whole set a,b,d at 2", got, caught.GetVersionInfo(), caught.GetNonce())
	}
	if !slices.ContainsFunc(caught.GetResources(), func(a *anypb.Any) bool { return bytes.Equal(a.GetValue(), changedB.GetValue()) }) {
		t.Fatal("the catch-up carries b as the new Envoy had it, not as changed at version 2")
	}
	// Its ACK goes upstream as a resubscription at the version held: no
	// nonce of the relay's, nothing for the control plane to answer.
	ack(next, caught)
	if got := cp.nextRequest(t); got.GetResponseNonce() != "" || got.GetVersionInfo() != "2" {
		t.Fatalf("the control plane got %v for the catch-up's ACK, want version 2 and no nonce", got)
	}

	cp.push <- mustMarshal(t, sotwResponse(t, "3", changedB, listener(t, "d", 0)))
	resp := next.recvSotw()
	if resp.GetNonce() != "3" {
		t.Fatalf("after the switch the new Envoy got %v", resp)
	}
	ack(next, resp)
	// The new Envoy's ACK of its first answer may reach the relay only
	// after the switch: it goes upstream as one more resubscription at the
	// version held, which go-control-plane answers with nothing.
	got := cp.nextRequest(t)
	for got.GetResponseNonce() == "" && got.GetVersionInfo() == "2" {
		got = cp.nextRequest(t)
	}
	if got.GetResponseNonce() != "3" || got.GetVersionInfo() != "3" {
		t.Fatalf("the control plane got %v, want the new Envoy's ACK of 3", got)
	}
	// The old Envoy exits after its drain: the stream is the new one's now.
	old.close()
	cp.push <- mustMarshal(t, sotwResponse(t, "4", listener(t, "d", 0), listener(t, "e", 0)))
	if resp = next.recvSotw(); resp.GetNonce() != "4" {
		t.Fatalf("after the old Envoy left the new one got %v", resp)
	}
	ack(next, resp)
	cp.nextRequest(t)
	awaitHeld(t, r, "d,e")
	cp.sawOneStream(t)
}

// sotwResponse is the control plane's whole set of clusterType at version,
// with the version as its nonce.
func sotwResponse(t *testing.T, version string, resources ...*anypb.Any) *discoveryv3.DiscoveryResponse {
	t.Helper()
	return &discoveryv3.DiscoveryResponse{TypeUrl: clusterType, VersionInfo: version, Nonce: version, Resources: resources}
}

// sotwNames are a response's resource names, sorted.
func sotwNames(t *testing.T, resp *discoveryv3.DiscoveryResponse) string {
	t.Helper()
	var out []string
	for _, a := range resp.GetResources() {
		out = append(out, mustName(t, a.GetValue()))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
