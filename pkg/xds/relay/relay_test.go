package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

const deltaMethod = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
const sotwMethod = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"

// Requests and responses cross the relay byte for byte, in order, and the
// control plane sees the token and metadata the agent gave.
func TestRelayForwardsUnchangedInOrder(t *testing.T) {
	for _, tc := range []struct {
		name, method string
		request      func(nonce string) proto.Message
		response     func(i int) proto.Message
	}{
		{"delta", deltaMethod,
			func(nonce string) proto.Message {
				return &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: listenerType, ResponseNonce: nonce}
			},
			func(i int) proto.Message {
				return deltaResponse(t, listenerType, fmt.Sprint(i), fmt.Sprint("n", i), fmt.Sprint("listener-", i))
			}},
		{"state of the world", sotwMethod,
			func(nonce string) proto.Message {
				return &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: listenerType, ResponseNonce: nonce}
			},
			func(i int) proto.Message {
				return &discoveryv3.DiscoveryResponse{TypeUrl: listenerType, VersionInfo: fmt.Sprint(i), Nonce: fmt.Sprint("n", i),
					Resources: []*anypb.Any{listener(t, fmt.Sprint("listener-", i), 0)}}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const responses = 20
			p := newPKI(t)
			var sent [][]byte
			for i := 0; i < responses; i++ {
				sent = append(sent, mustMarshal(t, tc.response(i)))
			}
			received := make(chan []byte, 100)
			cp := startFakeCP(t, p, "", func(s *cpStream) error {
				for {
					b, err := s.recv()
					if err != nil {
						return nil
					}
					received <- b
					if len(received) == 1 {
						for _, r := range sent {
							if err := s.send(r); err != nil {
								return err
							}
						}
					}
				}
			})
			ev := newEvents()
			r := startRelay(t, p, cp.addr, staticToken("tok-1"), ev)
			envoy := dialEnvoy(t, r, tc.method)
			first := envoy.send(tc.request(""))
			for i, want := range sent {
				got, err := envoy.recv()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("response %d changed on the way", i)
				}
			}
			if got := <-received; !bytes.Equal(got, first) {
				t.Fatal("Envoy's request changed on the way")
			}
			ack := envoy.send(tc.request("n0"))
			if got := <-received; !bytes.Equal(got, ack) {
				t.Fatal("Envoy's ACK changed on the way")
			}
			s := cp.nextStream(t)
			if s.token != "tok-1" || strings.Join(s.md.Get("x-zone"), ",") != "east" {
				t.Fatalf("control plane saw authorization %q, x-zone %v", s.token, s.md.Get("x-zone"))
			}
			ev.await(t, "the ACK observed", func(e *events) bool { return len(e.accepts) == 1 })
			if a := ev.accepts[0]; a.TypeURL != listenerType || a.Version != "0" || len(a.Names) != 1 || a.Names[0] != "listener-0" || a.FromCache {
				t.Fatalf("accepted %+v", a)
			}
		})
	}
}

// The token source is asked for every new upstream stream.
func TestTokenIsReadForEveryStream(t *testing.T) {
	p := newPKI(t)
	cp := startFakeCP(t, p, "", func(s *cpStream) error {
		_, _ = s.recv()
		return s.send(mustMarshal(t, deltaResponse(t, listenerType, "1", "n1", "l")))
	})
	var n atomic.Int32
	r := startRelay(t, p, cp.addr, func() (string, error) { return fmt.Sprint("tok-", n.Add(1)), nil }, nil)
	for i := 1; i <= 3; i++ {
		envoy := dialEnvoy(t, r, deltaMethod)
		envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: listenerType})
		envoy.recvDelta()
		if s := cp.nextStream(t); s.token != fmt.Sprint("tok-", i) {
			t.Fatalf("stream %d carried %q", i, s.token)
		}
		envoy.close()
	}
}

// What kuma-cp says when it ends a stream reaches Envoy, the agent's
// callback, the state and the metrics.
func TestControlPlaneErrorIsReported(t *testing.T) {
	const text = `authentication failed: dataplane workload "zp" is not allowed with this token`
	p := newPKI(t)
	cp := startFakeCP(t, p, "", func(s *cpStream) error {
		_, _ = s.recv()
		return grpcstatus.Error(codes.Unknown, text)
	})
	ev := newEvents()
	r := startRelay(t, p, cp.addr, staticToken("tok"), ev)
	envoy := dialEnvoy(t, r, deltaMethod)
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
	_, err := envoy.recv()
	if st := grpcstatus.Convert(err); st.Code() != codes.Unknown || st.Message() != text {
		t.Fatalf("Envoy got %v", err)
	}
	ev.await(t, "the stream error", func(e *events) bool { return len(e.errs) == 1 })
	if se := ev.errs[0]; se.Code != codes.Unknown || se.Message != text || se.Unreachable || se.Retrying {
		t.Fatalf("reported %+v", se)
	}
	if st := r.State(); st.LastError == nil || st.LastError.Message != text {
		t.Fatalf("state %+v", st)
	}
	var m strings.Builder
	r.WriteMetrics(&m)
	if !strings.Contains(m.String(), `zoneproxy_xds_stream_errors_total{code="Unknown"} 1`) {
		t.Fatalf("metrics:\n%s", m.String())
	}
}

// kuma-cp allows one stream per node: a stream refused because the old one
// is still registered is retried, replaying Envoy's requests, and Envoy
// never sees the refusal.
func TestAlreadyActiveStreamIsRetried(t *testing.T) {
	p := newPKI(t)
	var streams atomic.Int32
	firsts := make(chan []byte, 10)
	cp := startFakeCP(t, p, "", func(s *cpStream) error {
		b, _ := s.recv()
		firsts <- b
		if streams.Add(1) <= 2 {
			return alreadyActiveStream()
		}
		if err := s.send(mustMarshal(t, deltaResponse(t, listenerType, "1", "n1", "l"))); err != nil {
			return err
		}
		_, err := s.recv()
		return err
	})
	ev := newEvents()
	r := startRelay(t, p, cp.addr, staticToken("tok"), ev)
	envoy := dialEnvoy(t, r, deltaMethod)
	first := envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: listenerType})
	if resp := envoy.recvDelta(); resp.GetNonce() != "n1" {
		t.Fatalf("Envoy got %v", resp)
	}
	for i := 0; i < 3; i++ {
		if b := <-firsts; !bytes.Equal(b, first) {
			t.Fatalf("stream %d did not start with Envoy's first request", i+1)
		}
	}
	ev.await(t, "two retries reported", func(e *events) bool { return len(e.errs) == 2 && e.errs[0].Retrying && e.errs[1].Retrying })
	// kuma-cp lets go at a moment the relay cannot know: it asks again
	// within a few hundred milliseconds, not at its backoff.
	if e := ev.errs[1]; e.Attempt != 2 || !e.Held || e.Next < heldRetryMin || e.Next > heldRetryMax {
		t.Fatalf("the second retry says attempt %d, next %s", e.Attempt, e.Next)
	}
}

// kuma-cp refuses a second stream of a node while the first is active: a
// new Envoy stream takes over only because the relay closes the old
// upstream stream first.
func TestNewEnvoyStreamTakesOverTheNode(t *testing.T) {
	p := newPKI(t)
	var mu sync.Mutex
	active := false
	cp := startFakeCP(t, p, "", func(s *cpStream) error {
		if _, err := s.recv(); err != nil {
			return nil
		}
		mu.Lock()
		if active {
			mu.Unlock()
			return alreadyActiveStream()
		}
		active = true
		mu.Unlock()
		defer func() { mu.Lock(); active = false; mu.Unlock() }()
		return s.answerAndHold(mustMarshal(t, deltaResponse(t, clusterType, "1", "n1", "c")))
	})
	r := startRelay(t, p, cp.addr, staticToken("tok"), nil)
	a := dialEnvoy(t, r, deltaMethod)
	a.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
	a.recvDelta()
	b := dialEnvoy(t, r, deltaMethod)
	b.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
	if resp := b.recvDelta(); resp.GetNonce() != "n1" {
		t.Fatalf("the new stream got %v", resp)
	}
	if _, err := a.recv(); grpcstatus.Code(err) != codes.Aborted {
		t.Fatalf("the replaced Envoy stream ended with %v", err)
	}
}

func TestNACKIsReportedAndCounted(t *testing.T) {
	p := newPKI(t)
	cp := startFakeCP(t, p, "", func(s *cpStream) error {
		_, _ = s.recv()
		_ = s.send(mustMarshal(t, deltaResponse(t, listenerType, "7", "n7", "zone-ingress")))
		for {
			if _, err := s.recv(); err != nil {
				return nil
			}
		}
	})
	ev := newEvents()
	r := startRelay(t, p, cp.addr, staticToken("tok"), ev)
	envoy := dialEnvoy(t, r, deltaMethod)
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: listenerType})
	envoy.recvDelta()
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, ResponseNonce: "n7",
		ErrorDetail: &status.Status{Code: 13, Message: "cannot bind '0.0.0.0:10001': Address already in use"}})
	ev.await(t, "the NACK", func(e *events) bool { return len(e.rejects) == 1 })
	want := Rejection{TypeURL: listenerType, Names: []string{"zone-ingress"}, Version: "7", Message: "cannot bind '0.0.0.0:10001': Address already in use"}
	if got := ev.rejects[0]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rejection %+v", got)
	}
	var m strings.Builder
	r.WriteMetrics(&m)
	if !strings.Contains(m.String(), `zoneproxy_xds_rejected_total{type="Listener"} 1`) {
		t.Fatalf("metrics:\n%s", m.String())
	}
	if names := r.Names(listenerType); len(names) != 0 {
		t.Fatalf("a rejected listener counted as held: %v", names)
	}
}

// The control plane's certificate must chain to the CA and name the host
// exactly; otherwise nothing is sent, and it is not an outage.
func TestControlPlaneCertificateIsVerified(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t)
	var streams atomic.Int32
	cp := startFakeCP(t, p, "", func(s *cpStream) error { streams.Add(1); return nil })
	for name, mod := range map[string]relayOpts{
		"other name": func(o *Options) { o.Upstream.ServerName = "cp.example" },
		"other CA":   func(o *Options) { o.Upstream.CAPEM = other.caPEM },
	} {
		t.Run(name, func(t *testing.T) {
			ev := newEvents()
			r := startRelay(t, p, cp.addr, staticToken("tok"), ev, mod)
			envoy := dialEnvoy(t, r, deltaMethod)
			envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
			if _, err := envoy.recv(); grpcstatus.Code(err) != codes.Unavailable {
				t.Fatalf("Envoy got %v", err)
			}
			ev.await(t, "the certificate error", func(e *events) bool { return len(e.errs) == 1 })
			if se := ev.errs[0]; se.Unreachable || !strings.Contains(se.Message, "certificate is not trusted") {
				t.Fatalf("reported %+v", se)
			}
		})
	}
	if streams.Load() != 0 {
		t.Fatal("a stream reached an untrusted control plane")
	}
}

func TestUnreachableControlPlaneWithoutCache(t *testing.T) {
	p := newPKI(t)
	ev := newEvents()
	r := startRelay(t, p, closedAddr(t), staticToken("tok"), ev)
	envoy := dialEnvoy(t, r, deltaMethod)
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
	if _, err := envoy.recv(); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("Envoy got %v", err)
	}
	ev.await(t, "unreachable reported", func(e *events) bool { return len(e.errs) == 1 && e.errs[0].Unreachable })
}

// A token file being replaced is waited for, not sent empty.
func TestTokenReadFailureIsRetried(t *testing.T) {
	p := newPKI(t)
	cp := startFakeCP(t, p, "", func(s *cpStream) error {
		_, _ = s.recv()
		return s.send(mustMarshal(t, deltaResponse(t, listenerType, "1", "n1", "l")))
	})
	var calls atomic.Int32
	ev := newEvents()
	r := startRelay(t, p, cp.addr, func() (string, error) {
		if calls.Add(1) < 3 {
			return "", errors.New("--dataplane-token-file: /etc/zp/token is empty (is it being rotated?)")
		}
		return "tok", nil
	}, ev)
	envoy := dialEnvoy(t, r, deltaMethod)
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: listenerType})
	envoy.recvDelta()
	if s := cp.nextStream(t); s.token != "tok" {
		t.Fatalf("token %q", s.token)
	}
	ev.await(t, "two local retries", func(e *events) bool { return len(e.errs) == 2 && e.errs[0].Local && e.errs[0].Retrying })
	var m strings.Builder
	r.WriteMetrics(&m)
	if strings.Contains(m.String(), "zoneproxy_xds_stream_errors_total{") {
		t.Fatalf("a local token problem was counted as a control plane error:\n%s", m.String())
	}
}

// HDS goes through the relay too, with the token.
func TestHealthDiscoveryIsRelayed(t *testing.T) {
	p := newPKI(t)
	cp := startFakeCP(t, p, "", func(s *cpStream) error {
		b, err := s.recv()
		if err != nil {
			return nil
		}
		return s.send(append([]byte("echo:"), b...))
	})
	r := startRelay(t, p, cp.addr, staticToken("tok"), nil)
	envoy := dialEnvoy(t, r, hdsMethod)
	envoy.sendRaw([]byte("hello"))
	b, err := envoy.recv()
	if err != nil || string(b) != "echo:hello" {
		t.Fatalf("got %q, %v", b, err)
	}
	if s := cp.nextStream(t); s.method != "StreamHealthCheck" || s.token != "tok" {
		t.Fatalf("control plane saw %s with %q", s.method, s.token)
	}
	if _, err := envoy.recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("the control plane's clean end reached Envoy as %v", err)
	}
}

func TestSocketIsPrivateAndReplacesOnlyASocket(t *testing.T) {
	p := newPKI(t)
	r := startRelay(t, p, closedAddr(t), staticToken("tok"), nil)
	fi, err := os.Stat(r.opts.SocketPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, %v", fi.Mode().Perm(), err)
	}
	// A stale socket (a killed agent's) is replaced.
	r.Close()
	stale, err := net.Listen("unix", r.opts.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	if _, err := os.Stat(r.opts.SocketPath); err != nil {
		t.Fatalf("no stale socket to replace: %v", err)
	}
	r2, err := New(r.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Start(); err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	r2.Close()

	file := filepath.Join(t.TempDir(), "not-a-socket")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := r.opts
	opts.SocketPath = file
	r3, _ := New(opts)
	if err := r3.Start(); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep" {
		t.Fatal("a regular file was replaced")
	}
}

func TestNewRefusesIncompleteOptions(t *testing.T) {
	for name, opts := range map[string]Options{
		"no socket": {Upstream: cpdial.Target{Address: "a:1", CAPEM: newPKI(t).caPEM}, Token: staticToken("t")},
		// No CA at all means the system's roots; one that is not PEM is a mistake.
		"a CA that is no certificate": {SocketPath: "/x", Upstream: cpdial.Target{Address: "a:1", CAPEM: []byte("not PEM")}, Token: staticToken("t")},
	} {
		if _, err := New(opts); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// closedAddr is a loopback address nothing listens on.
var closedAddr = testutil.ClosedAddr

// An open whose Envoy stream ended while it waited for the node's lock
// must leave the newer session's live stream alone.
func TestStaleOpenLeavesTheLiveStreamAlone(t *testing.T) {
	p := newPKI(t)
	cpv := &versionedCP{version: "v1"}
	cp := startFakeCP(t, p, "", cpv.script(t))
	r := startRelay(t, p, cp.addr, staticToken("tok"), nil)
	live := dialEnvoy(t, r, deltaMethod)
	subscribe(t, live, clusterType, nil)

	r.upMu.Lock() // the stale session waits here while its Envoy leaves
	ctx, cancel := context.WithCancel(context.Background())
	opened := make(chan error, 1)
	go func() { _, err := r.open(ctx, delta{}, nil); opened <- err }()
	cancel()
	r.upMu.Unlock()
	if err := <-opened; err == nil {
		t.Fatal("a stale open succeeded")
	}
	if resp := subscribe(t, live, listenerType, nil); len(resp.GetResources()) != 1 {
		t.Fatalf("the live stream got %v", resp)
	}
}

// A stream the control plane ends while the relay still replays Envoy's
// requests on it is a failed open: the responses it sent are dropped
// together, never delivered with the first one lost.
func TestStreamEndedDuringTheReplayDeliversNothing(t *testing.T) {
	p := newPKI(t)
	var streams atomic.Int32
	cp := startFakeCP(t, p, "", func(s *cpStream) error {
		if streams.Add(1) == 1 {
			for range 3 { // the relay's replay is then all three
				if _, err := s.recv(); err != nil {
					return nil
				}
			}
			return alreadyActiveStream()
		}
		// Reading one request leaves the replay stuck behind the big one.
		if _, err := s.recv(); err != nil {
			return nil
		}
		for _, n := range []string{"n1", "n2"} {
			if err := s.send(mustMarshal(t, deltaResponse(t, clusterType, "1", n, "c"))); err != nil {
				return nil
			}
		}
		return nil // a replica shutting down ends its streams with OK
	}, grpc.StaticStreamWindowSize(64<<10), grpc.StaticConnWindowSize(64<<10))
	r := startRelay(t, p, cp.addr, staticToken("tok"), nil)
	envoy := dialEnvoy(t, r, deltaMethod)
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: clusterType})
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, ResourceNamesSubscribe: []string{strings.Repeat("l", 1<<20)}})
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, ResourceNamesSubscribe: []string{"other"}})
	b, err := envoy.recv()
	if err == nil {
		resp := &discoveryv3.DeltaDiscoveryResponse{}
		_ = proto.Unmarshal(b, resp)
		t.Fatalf("Envoy got response %q, with the stream's earlier one lost", resp.GetNonce())
	}
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Envoy's stream ended with %v, not as the control plane ended it", err)
	}
}
