package xds

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/zoneproxy/zoneproxy/pkg/xds/relay"
)

// fakeRelay withdraws as told: err, or once mark has run on node.
type fakeRelay struct {
	err       error
	block     bool // until ctx ends
	node      *corev3.Node
	withdrawn bool
	rejoined  int
	state     relay.State
	// reregisters counts Reregister calls; streamOpen is what it says.
	reregisters int
	streamOpen  bool
	unanswered  []string
}

func (r *fakeRelay) State() relay.State { return r.state }
func (r *fakeRelay) Withdraw(ctx context.Context, mark func(*corev3.Node) error) error {
	if r.block {
		<-ctx.Done()
		return ctx.Err()
	}
	if r.err != nil {
		return r.err
	}
	if err := mark(r.node); err != nil {
		return err
	}
	r.withdrawn = true
	return nil
}
func (r *fakeRelay) Withdrawn() bool                        { return r.withdrawn }
func (r *fakeRelay) Rejoin()                                { r.rejoined++; r.withdrawn = false }
func (r *fakeRelay) Reregister() bool                       { r.reregisters++; return r.streamOpen }
func (r *fakeRelay) Unanswered() []string                   { return r.unanswered }
func (r *fakeRelay) BeginHandover(int)                      {}
func (r *fakeRelay) CompleteHandover(context.Context) error { return nil }
func (r *fakeRelay) EndHandover()                           {}
func (r *fakeRelay) Close()                                 {}

const egressDataplane = `{"type":"Dataplane","networking":{"address":"127.0.0.1","listeners":[{"type":"ZoneEgress","port":10002}]}}`

func nodeWith(resource string) *corev3.Node {
	return &corev3.Node{Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		nodeResourceKey: structpb.NewStringValue(resource),
	}}}
}

func TestWithdrawEgress(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	tests := []struct {
		name      string
		relay     *fakeRelay // nil: direct mode
		skip      <-chan struct{}
		want      bool
		announced bool   // the withdrawn hook ran
		marked    string // in the Dataplane registered anew
	}{
		{name: "direct mode: no stream is the agent's"},
		{name: "withdrawn, then the sidecars hear of it", relay: &fakeRelay{node: nodeWith(egressDataplane)},
			want: true, announced: true, marked: `"state":"NotReady"`},
		{name: "the relay cannot", relay: &fakeRelay{err: errors.New("no stream to close")}},
		{name: "a Dataplane without an egress listener is not registered anew",
			relay: &fakeRelay{node: nodeWith(`{"type":"Dataplane","networking":{"listeners":[{"type":"ZoneIngress"}]}}`)}},
		{name: "a second stop cuts the wait for kuma-cp short", relay: &fakeRelay{block: true}, skip: closed},
		{name: "a second stop cuts the propagation short", relay: &fakeRelay{node: nodeWith(egressDataplane)}, skip: closed,
			want: true, announced: true, marked: `"state":"NotReady"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &Feature{notes: zap.NewNop(), egressPropagation: time.Hour}
			if tt.skip == nil {
				f.egressPropagation = time.Millisecond
			}
			if tt.relay != nil {
				f.relay = tt.relay
			}
			announced := false
			done := make(chan bool)
			go func() { done <- f.WithdrawEgress(tt.skip, func() { announced = true }) }()
			var got bool
			select {
			case got = <-done:
			case <-time.After(time.Minute):
				t.Fatal("WithdrawEgress does not return")
			}
			if got != tt.want || announced != tt.announced {
				t.Errorf("withdrawn %v, announced %v; want %v, %v", got, announced, tt.want, tt.announced)
			}
			if f.Withdrawn() != tt.want {
				t.Errorf("Withdrawn() = %v, want %v", f.Withdrawn(), tt.want)
			}
			if tt.marked != "" {
				if res := tt.relay.node.GetMetadata().GetFields()[nodeResourceKey].GetStringValue(); !strings.Contains(res, tt.marked) {
					t.Errorf("registered anew with %s", res)
				}
			}
			f.Rejoin()
			if f.Withdrawn() {
				t.Error("still withdrawn after Rejoin")
			}
		})
	}
}

// A handover needs the control plane's own configuration flowing.
func TestFromControlPlane(t *testing.T) {
	tests := []struct {
		name  string
		relay *fakeRelay
		state UpstreamState
		ok    bool
	}{
		{name: "direct mode"},
		{name: "connected", relay: &fakeRelay{state: relay.State{Upstream: Upstream{State: Connected}}}, state: Connected, ok: true},
		{name: "connected, the cache still serving", relay: &fakeRelay{state: relay.State{Upstream: Upstream{State: Connected}, Cache: CacheState{InUse: true}}}, state: Connected},
		{name: "held", relay: &fakeRelay{state: relay.State{Upstream: Upstream{State: Held}}}, state: Held},
	}
	for _, tt := range tests {
		f := &Feature{}
		if tt.relay != nil {
			f.relay = tt.relay
		}
		if state, ok := f.FromControlPlane(); state != tt.state || ok != tt.ok {
			t.Errorf("%s: %q, %v; want %q, %v", tt.name, state, ok, tt.state, tt.ok)
		}
	}
	if err := (&Feature{}).CompleteHandover(context.Background()); err == nil {
		t.Error("a handover completes in direct mode")
	}
}
