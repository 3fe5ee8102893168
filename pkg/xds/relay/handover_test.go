package relay

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// scriptedCP answers what the test pushes and records every request,
// decoded as R (delta or state-of-the-world).
type scriptedCP[R xdsRequest] struct {
	*fakeCP
	streams atomic.Int32
	push    chan []byte
	reqs    chan R
}

// xdsRequest is what the scripted control plane reads of a request.
type xdsRequest interface {
	proto.Message
	GetResponseNonce() string
}

func startScriptedCP(t *testing.T, p *pki) *scriptedCP[*discoveryv3.DeltaDiscoveryRequest] {
	return startScripted(t, p, func() *discoveryv3.DeltaDiscoveryRequest { return &discoveryv3.DeltaDiscoveryRequest{} })
}

func startScripted[R xdsRequest](t *testing.T, p *pki, newRequest func() R) *scriptedCP[R] {
	cp := &scriptedCP[R]{push: make(chan []byte, 10), reqs: make(chan R, 100)}
	cp.fakeCP = startFakeCP(t, p, "", func(s *cpStream) error {
		cp.streams.Add(1)
		go func() {
			for {
				b, err := s.recv()
				if err != nil {
					return
				}
				req := newRequest()
				if err := proto.Unmarshal(b, req); err != nil {
					t.Errorf("the control plane got an unreadable request: %v", err)
					return
				}
				cp.reqs <- req
			}
		}()
		for {
			select {
			case b := <-cp.push:
				if err := s.send(b); err != nil {
					return nil
				}
			case <-s.Context().Done():
				return nil
			}
		}
	})
	return cp
}

// nextRequest is the control plane's next request; none may carry a
// nonce of the relay's own.
func (cp *scriptedCP[R]) nextRequest(t *testing.T) R {
	t.Helper()
	select {
	case r := <-cp.reqs:
		if strings.HasPrefix(r.GetResponseNonce(), relayNoncePrefix) {
			t.Fatalf("the relay's own nonce reached the control plane: %v", r)
		}
		return r
	case <-time.After(waitLimit):
		t.Fatal("the control plane got no request")
		var none R
		return none
	}
}

// sawOneStream: the control plane saw one stream, still open.
func (cp *scriptedCP[R]) sawOneStream(t *testing.T) {
	t.Helper()
	if n := cp.streams.Load(); n != 1 {
		t.Errorf("the control plane saw %d streams, want one throughout", n)
	}
	if l := cp.log(); len(l) != 1 {
		t.Errorf("control plane stream events %v, want one open and no close", l)
	}
}

// A handover moves the one upstream stream from the serving Envoy to the
// new one: the new Envoy is answered from what the old one holds, gets
// what changed meanwhile at the switch, and from then on the control
// plane's updates go to it and its ACKs upstream; the control plane sees
// one stream throughout and none of the relay's own nonces.
func TestHandoverMovesTheOneStreamToTheNewEnvoy(t *testing.T) {
	p := newPKI(t)
	cp := startScriptedCP(t, p)
	r := startRelay(t, p, cp.addr, staticToken("tok"), nil)

	old := dialEnvoy(t, r, deltaMethod)
	old.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
	cp.nextRequest(t)
	cp.push <- mustMarshal(t, deltaResponse(t, clusterType, "1", "1", "a", "b"))
	resp := old.recvDelta()
	old.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: clusterType, ResponseNonce: resp.GetNonce()})
	if ack := cp.nextRequest(t); ack.GetResponseNonce() != "1" {
		t.Fatalf("ACK %v", ack)
	}

	awaitHeld(t, r, "a,b")
	r.BeginHandover(notThisProcess)
	defer r.EndHandover()
	next := dialEnvoy(t, r, deltaMethod)
	first := subscribe(t, next, clusterType, nil)
	if got := resourceNames(first); got != "a,b" || !strings.HasPrefix(first.GetNonce(), relayNoncePrefix) {
		t.Fatalf("the new Envoy got %s (nonce %q), want what the old one holds, from the relay", got, first.GetNonce())
	}

	// An update during the overlap reaches the serving Envoy only.
	cp.push <- mustMarshal(t, deltaResponse(t, clusterType, "2", "2", "b"))
	resp = old.recvDelta()
	old.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: clusterType, ResponseNonce: resp.GetNonce()})
	cp.nextRequest(t)

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.CompleteHandover(ctx); err != nil {
		t.Fatal(err)
	}
	caught := next.recvDelta()
	if got := resourceNames(caught); got != "b" || caught.GetResources()[0].GetVersion() != "2" {
		t.Fatalf("catch-up %v, want b at version 2", caught)
	}
	next.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: clusterType, ResponseNonce: caught.GetNonce()})

	cp.push <- mustMarshal(t, deltaResponse(t, clusterType, "3", "3", "c"))
	resp = next.recvDelta()
	if resp.GetNonce() != "3" {
		t.Fatalf("after the switch the new Envoy got %v", resp)
	}
	next.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: clusterType, ResponseNonce: "3"})
	if ack := cp.nextRequest(t); ack.GetResponseNonce() != "3" {
		t.Fatalf("the control plane got %v, want the new Envoy's ACK of 3", ack)
	}
	// The old Envoy exits after its drain: the stream is the new one's now.
	old.close()
	cp.push <- mustMarshal(t, deltaResponse(t, clusterType, "4", "4", "d"))
	if resp = next.recvDelta(); resp.GetNonce() != "4" {
		t.Fatalf("after the old Envoy left the new one got %v", resp)
	}
	next.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: clusterType, ResponseNonce: "4"})
	cp.nextRequest(t)
	awaitHeld(t, r, "a,b,c,d")
	cp.sawOneStream(t)
}

// The switch waits for the serving Envoy to answer what it was sent: a
// response it has not ACKed would be missing from the new Envoy.
func TestHandoverWaitsForTheServingEnvoysACK(t *testing.T) {
	p := newPKI(t)
	cp := startScriptedCP(t, p)
	r := startRelay(t, p, cp.addr, staticToken("tok"), nil)
	old := dialEnvoy(t, r, deltaMethod)
	old.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
	cp.nextRequest(t)
	cp.push <- mustMarshal(t, deltaResponse(t, clusterType, "1", "1", "a"))
	resp := old.recvDelta()

	r.BeginHandover(notThisProcess)
	defer r.EndHandover()
	next := dialEnvoy(t, r, deltaMethod)
	next.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
	next.recvDelta()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := r.CompleteHandover(ctx); err == nil {
		t.Fatal("the stream moved while the serving Envoy had not ACKed its last response")
	}
	old.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: clusterType, ResponseNonce: resp.GetNonce()})
	ctx2, cancel2 := context.WithTimeout(context.Background(), waitLimit)
	defer cancel2()
	if err := r.CompleteHandover(ctx2); err != nil {
		t.Fatal(err)
	}
	if got := resourceNames(next.recvDelta()); got != "a" {
		t.Fatalf("catch-up %s", got)
	}
}

func resourceNames(resp *discoveryv3.DeltaDiscoveryResponse) string {
	var out []string
	for _, r := range resp.GetResources() {
		out = append(out, r.GetName())
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// awaitHeld waits for the relay's view of the clusters Envoy holds to be
// names: its observer reads an ACK behind forwarding it.
func awaitHeld(t *testing.T, r *Relay, names string) {
	t.Helper()
	testutil.Eventually(t, waitLimit, "the relay's view of what Envoy holds to be "+names, func() bool {
		return strings.Join(r.Names(clusterType), ",") == names
	})
}

// notThisProcess stands for the serving Envoy's process: both Envoys of a
// test are this process, and the serving one's stream opened before.
const notThisProcess = -1
