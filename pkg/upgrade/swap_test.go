package upgrade

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

const zoneListener = "self_zoneegress_dp_ze-port"

// swapRig is a Swap with fakes: the Envoys it starts, the files it wrote.
type swapRig struct {
	swap     Swap[*fakeProc, *fakeAdmin]
	launch   *Launch
	relay    *fakeRelay
	admin    *fakeAdmin // the next Envoy's
	started  []*fakeProc
	specs    []envoy.Spec
	admins   []envoy.AdminAddress
	written  map[string]string
	findErr  error
	startErr error
}

func newSwapRig() *swapRig {
	r := &swapRig{relay: &fakeRelay{}, admin: &fakeAdmin{word: "LIVE", listeners: []string{zoneListener}}, written: map[string]string{}}
	r.launch = &Launch{
		Write: func(name string, doc []byte) (string, error) {
			r.written[name] = string(doc)
			return "/run/zp/" + name, nil
		},
		Bootstrap: []byte(`{"admin":{"address":{"pipe":{"path":"/run/zp/kuma-envoy-admin.sock"}}}}`),
		A:         Files{Bootstrap: "bootstrap.yaml", Admin: envoy.AdminAddress{Socket: "/run/zp/kuma-envoy-admin.sock"}},
		Opts:      envoy.Options{DrainTime: time.Minute, LogLevel: "info"},
		Spec:      envoy.Spec{Dir: "/run/zp"},
	}
	r.swap = Swap[*fakeProc, *fakeAdmin]{
		Log: zap.NewNop(),
		Find: func(context.Context) (string, envoy.Version, error) {
			return "/usr/bin/envoy", envoy.Version{Version: "1.39.1", Build: "next"}, r.findErr
		},
		Start: func(spec envoy.Spec) (*fakeProc, error) {
			if r.startErr != nil {
				return nil, r.startErr
			}
			p := newFakeProc(100 + len(r.started))
			r.started, r.specs = append(r.started, p), append(r.specs, spec)
			return p, nil
		},
		Admin: func(addr envoy.AdminAddress) *fakeAdmin {
			r.admins = append(r.admins, addr)
			return r.admin
		},
		Want: []string{zoneListener}, LiveTimeout: 300 * time.Millisecond, SwitchTimeout: time.Second, Grace: time.Second,
		Retiring: &Retirements{},
	}
	return r
}

// A handover starts the next Envoy in the other slot, on that slot's
// bootstrap copy and admin socket, and hands it the control plane's stream.
func TestAHandoverStartsTheNextEnvoyInTheOtherSlot(t *testing.T) {
	for _, tc := range []struct {
		from        Place
		want        Place
		file, admin string
	}{
		{Place{1, SlotA}, Place{2, SlotB}, "bootstrap-handover.yaml", "/run/zp/zoneproxy-envoy-admin-handover.sock"},
		{Place{2, SlotB}, Place{3, SlotA}, "bootstrap.yaml", "/run/zp/kuma-envoy-admin.sock"},
	} {
		t.Run(string(tc.from.Slot), func(t *testing.T) {
			r := newSwapRig()
			committed := false
			took, err := r.swap.Run(context.Background(), r.launch, r.relay, 7, tc.from, func() error { committed = true; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if took.Place != tc.want || took.Proc != r.started[0] || took.Version.Build != "next" || took.Path != "/usr/bin/envoy" || !committed {
				t.Fatalf("took %+v (committed %v), want the new Envoy at %+v", took, committed, tc.want)
			}
			doc, ok := r.written[tc.file]
			if !ok || len(r.written) != 1 || !strings.Contains(doc, `"path":"`+tc.admin+`"`) || r.admins[0].Socket != tc.admin {
				t.Fatalf("wrote %v, admin %v; want only %s with admin %s", r.written, r.admins, tc.file, tc.admin)
			}
			if args := strings.Join(r.specs[0].Args, " "); !strings.Contains(args, "--config-path /run/zp/"+tc.file+" ") || r.specs[0].Path != "/usr/bin/envoy" {
				t.Fatalf("started %s %s", r.specs[0].Path, args)
			}
			if r.relay.began != 7 || !r.relay.ended {
				t.Fatalf("the relay's handover began for pid %d, ended %v", r.relay.began, r.relay.ended)
			}
		})
	}
}

// What fails a handover, and what is left: the new Envoy is ended and
// its admin client closed, the relay's handover ended; the old Envoy
// serves on. What refuses one starts nothing.
func TestWhatFailsOrRefusesAHandover(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setUp   func(r *swapRig)
		says    string
		refused bool
		started bool
	}{
		{"no relay", func(r *swapRig) { r.relay = nil }, "needs the xDS relay", true, false},
		{"the stream is not connected", func(r *swapRig) { r.relay.state = "held" }, `the control plane's stream is "held", not connected`, true, false},
		{"the last old Envoy still drains", func(r *swapRig) { r.swap.Retiring.draining.Store(41) }, "old Envoy (pid 41) still drains", true, false},
		{"no Envoy binary", func(r *swapRig) { r.findErr = errors.New("envoy: not found") }, "envoy: not found", false, false},
		{"it cannot start", func(r *swapRig) { r.startErr = errors.New("exec: permission denied") }, "permission denied", false, false},
		{"it exits", func(r *swapRig) { r.admin.word = "PRE_INITIALIZING"; r.startExits() }, "the new Envoy exited (exit status 0)", false, true},
		{"it never turns LIVE", func(r *swapRig) { r.admin.word = "PRE_INITIALIZING" }, "was not ready within 300ms: it reports PRE_INITIALIZING", false, true},
		{"its admin API never answers", func(r *swapRig) { r.admin.err = errAdminDown }, "was not ready within 300ms: its admin API does not answer", false, true},
		{"LIVE without the zone listener", func(r *swapRig) { r.admin.listeners = nil },
			"it is LIVE without the zone listeners [" + zoneListener + "] (could it not bind them beside the old Envoy?", false, true},
		{"the stream cannot be moved", func(r *swapRig) { r.relay.completeErr = errors.New("timed out") }, "the control plane's stream could not be moved to it: timed out", false, true},
		{"its bootstrap cannot be kept", nil, "disk full", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSwapRig()
			commit := func() error { return nil }
			if tc.setUp == nil {
				commit = func() error { return errors.New("disk full") }
			} else {
				tc.setUp(r)
			}
			var relay Relay
			if r.relay != nil {
				relay = r.relay
			}
			took, err := r.swap.Run(context.Background(), r.launch, relay, 7, Place{1, SlotA}, commit)
			if took != nil || err == nil || !strings.Contains(err.Error(), tc.says) || errors.Is(err, ErrHandoverRefused) != tc.refused {
				t.Fatalf("got %v, %v; want %s saying %q", took, err, map[bool]string{true: "a refusal", false: "a failure"}[tc.refused], tc.says)
			}
			if (len(r.started) > 0) != tc.started {
				t.Fatalf("started %d Envoys", len(r.started))
			}
			if tc.started {
				_, _, closed := r.admin.state()
				if !r.started[0].stopped.Load() || !closed || !r.relay.ended {
					t.Fatalf("the failed new Envoy stopped %v, its admin closed %v, the relay's handover ended %v", r.started[0].stopped.Load(), closed, r.relay.ended)
				}
			}
		})
	}
}

// startExits makes each started Envoy exit at once.
func (r *swapRig) startExits() {
	start := r.swap.Start
	r.swap.Start = func(spec envoy.Spec) (*fakeProc, error) {
		p, err := start(spec)
		if p != nil {
			p.exit()
		}
		return p, err
	}
}
