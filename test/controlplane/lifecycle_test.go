package controlplane

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

const egressLDS = "self_zoneegress_dp_ze-port"

// egressNode is the node of zone egress payments/name and a token for it.
func egressNode(t *testing.T, s *Server, name string) (*corev3.Node, string) {
	t.Helper()
	tok, err := s.IssueToken(TokenRequest{Mesh: "payments", Workload: "zp-egress"})
	if err != nil {
		t.Fatal(err)
	}
	return nodeFor(t, s, dpJSON(t, "payments", name, "zp-egress", egressListener), nil), tok
}

// firstResponse waits for the stream's first response.
func (c *deltaClient) firstResponse() *discoveryv3.DeltaDiscoveryResponse {
	c.t.Helper()
	select {
	case r := <-c.resps:
		return r
	case err := <-c.errc:
		c.t.Fatalf("stream ended: %v", err)
	case <-time.After(10 * time.Second):
		c.t.Fatal("no response")
	}
	return nil
}

func kinds(events []DataplaneEvent) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Kind)
	}
	return out
}

func TestLifecycleTimingsDefaultToKumaCPs(t *testing.T) {
	rows := []struct {
		name string
		opts Options
		want Timings
	}{
		{"zero is kuma-cp's default", Options{}, Timings{10 * time.Second, time.Second, 3 * time.Second}},
		{"negative is none", Options{DeregistrationDelay: -1, CacheExpiration: -1, EgressPropagation: -1}, Timings{}},
		{"set", Options{DeregistrationDelay: 2 * time.Second, CacheExpiration: 200 * time.Millisecond, EgressPropagation: 600 * time.Millisecond},
			Timings{2 * time.Second, 200 * time.Millisecond, 600 * time.Millisecond}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			if got := resolveTimings(r.opts); got != r.want {
				t.Errorf("timings %+v, want %+v", got, r.want)
			}
		})
	}
	s, err := Start(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Timings(); got != (Timings{DefaultDeregistrationDelay, DefaultCacheExpiration, DefaultEgressPropagation}) {
		t.Errorf("Start(Options{}) runs with %+v", got)
	}
}

func TestANodeIsRefusedUntilItsDeregistrationEnds(t *testing.T) {
	const delay = time.Second
	s := startTestServer(t, Options{Meshes: []string{"payments"}, DeregistrationDelay: delay})
	node, tok := egressNode(t, s, "zp-egress-1")
	id := node.GetId()

	first := dialADS(t, s, tok, node)
	first.collect(hasAll(resourcev3.ListenerType, egressLDS))
	firstStream := s.NodeStream(id).ActiveStream
	if firstStream == 0 || !s.NodeStream(id).Connected {
		t.Fatalf("after the first response: %+v", s.NodeStream(id))
	}
	first.cancel()
	var since time.Time
	eventually(t, "the closed stream deregistering", func() bool {
		if ns := s.NodeStream(id); ns.DeregisteringSince != nil {
			since = *ns.DeregisteringSince
			return true
		}
		return false
	})

	// A new stream meanwhile is refused with kuma-cp's text, after auth.
	dialADS(t, s, tok, node).expectError(codes.Unknown, alreadyActiveText)
	ns := s.NodeStream(id)
	if ns.ActiveStream != firstStream || ns.Connected || ns.Refusals != 1 || ns.LastRefusalAt == nil ||
		ns.DeregistrationAt == nil || !ns.DeregistrationAt.Equal(since.Add(delay)) {
		t.Errorf("while deregistering: %+v", ns)
	}
	if _, ok := s.Dataplane("payments", "zp-egress-1"); !ok {
		t.Error("the Dataplane left the store before the deregistration delay")
	}
	// A bad token is still refused for what it is: auth comes first.
	dialADS(t, s, "garbage", node).expectError(codes.Unknown, "authentication failed: could not parse token. "+tokenHint+": token is malformed: token contains an invalid number of segments")

	eventually(t, "the node released", func() bool { return s.NodeStream(id).ActiveStream == 0 })
	if released := time.Now(); released.Sub(since) < delay {
		t.Errorf("released %s after the stream closed, before the %s delay", released.Sub(since), delay)
	}
	// Accepted right after.
	dialADS(t, s, tok, node).collect(hasAll(resourcev3.ListenerType, egressLDS))
	ns = s.NodeStream(id)
	if ns.ActiveStream == 0 || ns.ActiveStream == firstStream || !ns.Connected || ns.Accepted != 2 || ns.Refusals != 1 {
		t.Errorf("after reconnecting: %+v", ns)
	}
}

func TestADataplaneIsDeletedAtTheDelayAndUpsertedByTheNextStream(t *testing.T) {
	const delay = 300 * time.Millisecond
	s := startTestServer(t, Options{Meshes: []string{"payments"}, DeregistrationDelay: delay})
	node, tok := egressNode(t, s, "zp-egress-1")

	first := dialADS(t, s, tok, node)
	first.collect(hasAll(resourcev3.ListenerType, egressLDS))
	rec, ok := s.Dataplane("payments", "zp-egress-1")
	if !ok {
		t.Fatal("no Dataplane after the stream was accepted")
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(rec.Spec, &spec); err != nil || spec["networking"] == nil || spec["name"] != nil || spec["labels"] != nil {
		t.Errorf("spec %s (%v): want the networking, not the meta", rec.Spec, err)
	}
	if want := []DataplaneListener{{Type: "ZoneEgress", Address: "127.0.0.1", Port: 10002, State: "Ready", Name: "ze-port"}}; len(rec.Listeners) != 1 || rec.Listeners[0] != want[0] {
		t.Errorf("listeners %+v, want %+v", rec.Listeners, want)
	}
	if rec.Labels[workloadLabel] != "zp-egress" || rec.StreamID == 0 {
		t.Errorf("record %+v", rec)
	}

	closedAt := time.Now()
	first.cancel()
	eventually(t, "the node released", func() bool { return s.NodeStream(node.GetId()).ActiveStream == 0 })
	if _, ok := s.Dataplane("payments", "zp-egress-1"); ok {
		t.Fatal("the Dataplane is still in the store after the deregistration")
	}
	tl := s.DataplaneTimeline("payments", "zp-egress-1")
	if got := kinds(tl); strings.Join(got, ",") != "upserted,deleted" {
		t.Fatalf("timeline %v", got)
	}
	deleted := tl[1]
	if d := deleted.At.Sub(closedAt); d < delay || d > delay+5*time.Second {
		t.Errorf("deleted %s after the stream closed, want %s", d, delay)
	}
	if deleted.StreamID != rec.StreamID || deleted.Reason != "deregistered" {
		t.Errorf("delete %+v, want stream %d deregistered", deleted, rec.StreamID)
	}

	dialADS(t, s, tok, node).collect(hasAll(resourcev3.ListenerType, egressLDS))
	tl = s.DataplaneTimeline("payments", "zp-egress-1")
	if got := kinds(tl); strings.Join(got, ",") != "upserted,deleted,upserted" {
		t.Fatalf("timeline %v", got)
	}
	if up := tl[2]; up.StreamID == rec.StreamID || string(up.Spec) != string(rec.Spec) || !up.At.After(deleted.At) {
		t.Errorf("second upsert %+v", up)
	}
	gaps := DataplaneGaps(tl, tl[0].At, time.Now())
	if len(gaps) != 1 || !gaps[0].From.Equal(deleted.At) || !gaps[0].To.Equal(tl[2].At) || gaps[0].Duration() <= 0 {
		t.Errorf("gaps %+v", gaps)
	}
}

func TestDataplaneGaps(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	up := func(s int) DataplaneEvent { return DataplaneEvent{At: at(s), Kind: DataplaneUpserted} }
	del := func(s int) DataplaneEvent { return DataplaneEvent{At: at(s), Kind: DataplaneDeleted} }
	rows := []struct {
		name     string
		events   []DataplaneEvent
		from, to int
		want     []Gap
	}{
		{"never there", nil, 0, 10, []Gap{{at(0), at(10)}}},
		{"there throughout", []DataplaneEvent{up(0)}, 1, 10, nil},
		{"deleted and back", []DataplaneEvent{up(0), del(3), up(5)}, 0, 10, []Gap{{at(3), at(5)}}},
		{"absent at from", []DataplaneEvent{up(0), del(1), up(4)}, 2, 10, []Gap{{at(2), at(4)}}},
		{"still absent at to", []DataplaneEvent{up(0), del(7)}, 0, 10, []Gap{{at(7), at(10)}}},
		{"events after to ignored", []DataplaneEvent{up(0), del(3), up(12)}, 0, 10, []Gap{{at(3), at(10)}}},
		{"repeated upserts", []DataplaneEvent{up(0), up(2), del(3), up(4), up(6)}, 0, 10, []Gap{{at(3), at(4)}}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			got := DataplaneGaps(r.events, at(r.from), at(r.to))
			if len(got) != len(r.want) {
				t.Fatalf("gaps %v, want %v", got, r.want)
			}
			for i := range got {
				if !got[i].From.Equal(r.want[i].From) || !got[i].To.Equal(r.want[i].To) {
					t.Errorf("gap %d %v, want %v", i, got[i], r.want[i])
				}
			}
		})
	}
}

func TestTheFirstResponseWaitsForTheCacheExpiration(t *testing.T) {
	rows := []struct {
		name       string
		expiration time.Duration
		atLeast    time.Duration
	}{
		{"kuma-cp's sleep, scaled down", 400 * time.Millisecond, 400 * time.Millisecond},
		{"none", -1, 0},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			s := startTestServer(t, Options{Meshes: []string{"payments"}, CacheExpiration: r.expiration})
			node, tok := egressNode(t, s, "zp-egress-1")
			c := dialADS(t, s, tok, node)
			c.firstResponse()
			got := time.Now()
			tl := s.DataplaneTimeline("payments", "zp-egress-1")
			if len(tl) != 1 {
				t.Fatalf("timeline %v", kinds(tl))
			}
			if d := got.Sub(tl[0].At); d < r.atLeast {
				t.Errorf("first response %s after the upsert, want at least %s", d, r.atLeast)
			}
			ns := s.NodeStream(node.GetId())
			if !ns.Connected || ns.ConnectedAt == nil || ns.ConnectedAt.Sub(tl[0].At) < r.atLeast {
				t.Errorf("stream %+v, upserted at %s", ns, tl[0].At)
			}
			if ps := s.Proxies(); len(ps) != 1 || !ps[0].Connected || !ps[0].ConnectedAt.Equal(*ns.ConnectedAt) {
				t.Errorf("proxies %+v", ps)
			}
		})
	}
}

func TestANotReadyEgressListenerIsNotAZoneEgress(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}, EgressPropagation: -1})
	rows := []struct {
		name      string
		listeners []listener
		want      []ZoneEgress
	}{
		{"ready egress", []listener{{Type: "ZoneEgress", Address: "127.0.0.1", Port: 10102, Name: "ze", State: "Ready"}},
			[]ZoneEgress{{"ready-egress", "127.0.0.1", 10102}}},
		{"egress without a state (Ready is the zero value)", []listener{{Type: "ZoneEgress", Address: "127.0.0.1", Port: 10103, Name: "ze"}},
			[]ZoneEgress{{"egress-without-a-state", "127.0.0.1", 10103}}},
		{"not-ready egress", []listener{{Type: "ZoneEgress", Address: "127.0.0.1", Port: 10104, Name: "ze", State: "NotReady"}}, nil},
		{"ingress", []listener{{Type: "ZoneIngress", Address: "127.0.0.1", Port: 10105, Name: "zi"}}, nil},
		{"ingress and not-ready egress and ready egress", []listener{
			{Type: "ZoneIngress", Address: "127.0.0.1", Port: 10106, Name: "zi"},
			{Type: "ZoneEgress", Address: "127.0.0.1", Port: 10107, Name: "ze-a", State: "NotReady"},
			{Type: "ZoneEgress", Address: "127.0.0.1", Port: 10108, Name: "ze-b"},
		}, []ZoneEgress{{"ingress-and-not-ready-egress-and-ready-egress", "127.0.0.1", 10108}}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			name := strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(r.name)
			name = strings.TrimSuffix(name, "-Ready-is-the-zero-value")
			dialProxy(t, s, "zp", name, r.listeners...)
			eventually(t, "connected", func() bool { return s.NodeStream("payments." + name).Connected })
			var got []ZoneEgress
			for _, e := range s.ZoneEgresses("payments") {
				if e.Dataplane == name {
					got = append(got, e)
				}
			}
			if len(got) != len(r.want) || (len(got) == 1 && got[0] != r.want[0]) {
				t.Errorf("zone egresses of %s: %+v, want %+v", name, got, r.want)
			}
			rec, _ := s.Dataplane("payments", name)
			for i, l := range rec.Listeners {
				want := r.listeners[i].State
				if want == "" {
					want = "Ready"
				}
				if l.State != want || l.Type != r.listeners[i].Type {
					t.Errorf("stored listener %d %+v", i, l)
				}
			}
		})
	}
}

func TestZoneEgressChangesReachTheSidecarsAfterThePropagationLag(t *testing.T) {
	const prop = 500 * time.Millisecond
	s := startTestServer(t, Options{Meshes: []string{"payments"}, EgressPropagation: prop, DeregistrationDelay: 200 * time.Millisecond})
	node, tok := egressNode(t, s, "zp-egress-1")
	c := dialADS(t, s, tok, node)
	c.collect(hasAll(resourcev3.ListenerType, egressLDS))
	upAt := s.DataplaneTimeline("payments", "zp-egress-1")[0].At
	want := ZoneEgress{"zp-egress-1", "127.0.0.1", 10002}

	if got := s.StoredZoneEgresses("payments"); len(got) != 1 || got[0] != want {
		t.Fatalf("stored set %+v", got)
	}
	if got := s.ZoneEgressesAt("payments", upAt.Add(prop-time.Millisecond)); len(got) != 0 {
		t.Errorf("handed out %+v before the propagation lag", got)
	}
	if got := s.ZoneEgressesAt("payments", upAt.Add(prop)); len(got) != 1 || got[0] != want {
		t.Errorf("handed out %+v at the end of the propagation lag", got)
	}
	eventually(t, "the egress handed out", func() bool { return len(s.ZoneEgresses("payments")) == 1 })
	if d := time.Since(upAt); d < prop {
		t.Errorf("handed out %s after the upsert", d)
	}

	// A stopping egress keeps being handed out until its Dataplane is
	// deleted and that reached the sidecars.
	c.cancel()
	eventually(t, "the Dataplane deleted", func() bool { _, ok := s.Dataplane("payments", "zp-egress-1"); return !ok })
	delAt := s.DataplaneTimeline("payments", "zp-egress-1")[1].At
	if got := s.StoredZoneEgresses("payments"); len(got) != 0 {
		t.Errorf("stored set %+v after the delete", got)
	}
	if got := s.ZoneEgressesAt("payments", delAt.Add(prop-time.Millisecond)); len(got) != 1 {
		t.Errorf("handed out %+v within the propagation lag of the delete", got)
	}
	eventually(t, "the egress withdrawn", func() bool { return len(s.ZoneEgresses("payments")) == 0 })
	if d := time.Since(delAt); d < prop {
		t.Errorf("withdrawn %s after the delete", d)
	}

	tl := s.ZoneEgressTimeline("payments")
	if len(tl) != 2 || tl[0].Kind != DataplaneUpserted || len(tl[0].Egresses) != 1 || tl[1].Kind != DataplaneDeleted || len(tl[1].Egresses) != 0 {
		t.Fatalf("egress timeline %+v", tl)
	}
	for _, e := range tl {
		if e.Dataplane != "zp-egress-1" || e.EffectiveAt.Sub(e.At) != prop {
			t.Errorf("change %+v", e)
		}
	}
}

func TestARestartDropsPendingDeregistrationsWithoutDeleting(t *testing.T) {
	const delay = time.Second
	s := startTestServer(t, Options{Meshes: []string{"payments"}, DeregistrationDelay: delay})
	egress, tok := egressNode(t, s, "zp-egress-1")
	a := dialADS(t, s, tok, egress)
	a.collect(hasAll(resourcev3.ListenerType, egressLDS))
	b := dialProxy(t, s, "zp-ingress", "zp-ingress-1", ingressListener)
	b.collect(hasAll(resourcev3.ListenerType, "self_zoneingress_dp_zi-port"))

	a.cancel()
	eventually(t, "the egress deregistering", func() bool { return s.NodeStream(egress.GetId()).DeregisteringSince != nil })
	restartedAt := time.Now()
	if err := s.Restart(50 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{egress.GetId(), "payments.zp-ingress-1"} {
		if ns := s.NodeStream(id); ns.ActiveStream != 0 || ns.Connected || ns.DeregisteringSince != nil {
			t.Errorf("after the restart: %+v", ns)
		}
	}
	// Nothing is active: the egress is accepted at once.
	dialADS(t, s, tok, egress).collect(hasAll(resourcev3.ListenerType, egressLDS))

	// Past the dropped delay nothing was deleted; the ingress, whose
	// stream the restart cut, stays in the store too.
	time.Sleep(time.Until(restartedAt.Add(delay + 300*time.Millisecond)))
	if got := kinds(s.DataplaneTimeline("payments", "zp-egress-1")); strings.Join(got, ",") != "upserted,upserted" {
		t.Errorf("egress timeline %v", got)
	}
	if got := kinds(s.DataplaneTimeline("payments", "zp-ingress-1")); strings.Join(got, ",") != "upserted" {
		t.Errorf("ingress timeline %v", got)
	}
	if _, ok := s.Dataplane("payments", "zp-ingress-1"); !ok {
		t.Error("the ingress Dataplane is gone")
	}
}

func TestDeletingAMeshDeletesItsDataplanes(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	node, tok := egressNode(t, s, "zp-egress-1")
	c := dialADS(t, s, tok, node)
	c.collect(hasAll(resourcev3.ListenerType, egressLDS))
	s.DeleteMesh("payments")
	tl := s.DataplaneTimeline("payments", "zp-egress-1")
	if len(tl) != 2 || tl[1].Kind != DataplaneDeleted || tl[1].Reason != "mesh deleted" || tl[1].StreamID != 0 {
		t.Fatalf("timeline %+v", tl)
	}
	// The stream's later deregistration finds nothing to delete, and a
	// new registration cannot create it without its mesh.
	c.cancel()
	eventually(t, "the node released", func() bool { return s.NodeStream(node.GetId()).ActiveStream == 0 })
	dialADS(t, s, tok, node).expectError(codes.Unknown, "could not register proxy passed in kuma-dp run: mesh of name payments is not found")
	if got := kinds(s.DataplaneTimeline("payments", "zp-egress-1")); len(got) != 2 {
		t.Errorf("timeline %v", got)
	}
}

func TestAnUpsertMustBeAllowedForTheStoredDataplane(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	first := dialProxy(t, s, "zp-egress", "zp-1", egressListener)
	first.collect(hasAll(resourcev3.ListenerType, egressLDS))
	if err := s.Restart(0); err != nil { // keeps the Dataplane, forgets the stream
		t.Fatal(err)
	}
	// The same name for another workload, with a token for that one.
	tok, _ := s.IssueToken(TokenRequest{Mesh: "payments", Workload: "zp-ingress"})
	node := nodeFor(t, s, dpJSON(t, "payments", "zp-1", "zp-ingress", ingressListener), nil)
	dialADS(t, s, tok, node).expectError(codes.Unknown, "could not register proxy passed in kuma-dp run: you are trying to override existing proxy to which you don't have an access.: "+
		`dataplane workload "zp-egress" is not allowed with this token. Allowed workload in token is "zp-ingress"`)
}

func TestHangFreezesTheDPServerUntilCleared(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})

	// A connection made before the freeze, with a stream on it.
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: caPool(t, s), MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	openStream := func(node *corev3.Node, tok string) <-chan error {
		ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", tok))
		t.Cleanup(cancel)
		done := make(chan error, 1)
		go func() {
			stream, err := ads.DeltaAggregatedResources(ctx)
			if err == nil {
				err = stream.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: resourcev3.ClusterType})
			}
			if err == nil {
				_, err = stream.Recv()
			}
			done <- err
		}()
		return done
	}
	egress, egressTok := egressNode(t, s, "zp-egress-1")
	if err := arrive(t, openStream(egress, egressTok)); err != nil {
		t.Fatalf("before the freeze: %v", err)
	}
	ingressTok, _ := s.IssueToken(TokenRequest{Mesh: "payments", Workload: "zp-ingress"})
	ingress := nodeFor(t, s, dpJSON(t, "payments", "zp-ingress-1", "zp-ingress", ingressListener), nil)
	body := mustJSON(t, bootstrapBody("payments", "zp-egress-2", "tok", dpJSON(t, "payments", "zp-egress-2", "", egressListener)))

	s.SetFaults(Faults{Hang: true})

	// The kernel still completes TCP handshakes; TLS never completes.
	raw, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		t.Fatalf("TCP connect while hung: %v", err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(300 * time.Millisecond))
	var ne net.Error
	if err := tls.Client(raw, &tls.Config{RootCAs: caPool(t, s), ServerName: "127.0.0.1"}).Handshake(); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("TLS handshake while hung: %v, want a timeout", err)
	}

	// A bootstrap POST on a new connection and a new stream on the old one
	// hang: they neither complete nor fail.
	boot := make(chan error, 1)
	client := httpClient(t, s, false)
	go func() {
		resp, err := client.Post(s.URL()+"/bootstrap", "application/json", strings.NewReader(string(body)))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = errors.New(resp.Status)
			}
		}
		boot <- err
	}()
	stream := openStream(ingress, ingressTok)
	select {
	case err := <-boot:
		t.Fatalf("the bootstrap POST ended while hung: %v", err)
	case err := <-stream:
		t.Fatalf("the stream got an answer while hung: %v", err)
	case <-time.After(700 * time.Millisecond):
	}
	// The admin API still answers.
	if st, got, _ := adminDo(t, s, "GET", "/faults", ""); st != 200 || !strings.Contains(got, `"hang":true`) {
		t.Errorf("GET /faults while hung: %d %s", st, got)
	}

	s.SetFaults(Faults{})
	if err := arrive(t, boot); err != nil {
		t.Errorf("bootstrap after the thaw: %v", err)
	}
	if err := arrive(t, stream); err != nil {
		t.Errorf("stream after the thaw: %v", err)
	}
}

// arrive waits for c's value, failing after 10 s.
func arrive(t *testing.T, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("nothing arrived")
	}
	return nil
}

func TestLifecycleAdminAPI(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	get := func(path string, want int) map[string]any {
		t.Helper()
		st, body, _ := adminDo(t, s, "GET", path, "")
		if st != want {
			t.Fatalf("GET %s: %d %s", path, st, body)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
		return m
	}
	isTime := func(what string, v any) {
		t.Helper()
		str, _ := v.(string)
		if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
			t.Errorf("%s %v is not RFC3339Nano", what, v)
		}
	}

	get("/meshes/payments/dataplanes/zp-egress-1", 404)
	node, tok := egressNode(t, s, "zp-egress-1")
	c := dialADS(t, s, tok, node)
	c.collect(hasAll(resourcev3.ListenerType, egressLDS))

	dp := get("/meshes/payments/dataplanes/zp-egress-1", 200)
	ls, _ := dp["listeners"].([]any)
	if dp["name"] != "zp-egress-1" || dp["spec"].(map[string]any)["networking"] == nil || len(ls) != 1 {
		t.Errorf("dataplane %v", dp)
	} else if l := ls[0].(map[string]any); l["type"] != "ZoneEgress" || l["state"] != "Ready" || l["port"] != 10002.0 || l["address"] != "127.0.0.1" {
		t.Errorf("listener %v", l)
	}
	isTime("creationTime", dp["creationTime"])

	tl := get("/meshes/payments/dataplanes/zp-egress-1/timeline", 200)
	evs, _ := tl["events"].([]any)
	if tl["present"] != true || len(evs) != 1 || evs[0].(map[string]any)["kind"] != "upserted" {
		t.Errorf("timeline %v", tl)
	} else {
		isTime("event at", evs[0].(map[string]any)["at"])
	}

	eventually(t, "the egress handed out", func() bool { return len(s.ZoneEgresses("payments")) == 1 })
	ze := get("/meshes/payments/zone-egresses", 200)
	if h, _ := ze["handedOut"].([]any); len(h) != 1 || h[0].(map[string]any)["dataplane"] != "zp-egress-1" {
		t.Errorf("zone egresses %v", ze)
	}
	if raw, _ := ze["raw"].([]any); len(raw) != 1 || ze["egressPropagation"] != testEgressPropagation.String() {
		t.Errorf("zone egresses %v", ze)
	}
	isTime("asOf", ze["asOf"])
	zt := get("/meshes/payments/zone-egresses/timeline", 200)
	if ch, _ := zt["changes"].([]any); len(ch) != 1 {
		t.Errorf("zone egress timeline %v", zt)
	} else {
		isTime("effectiveAt", ch[0].(map[string]any)["effectiveAt"])
	}

	ns := get("/nodes/payments.zp-egress-1/stream", 200)
	if ns["activeStream"] == 0.0 || ns["connected"] != true || ns["nodeId"] != "payments.zp-egress-1" {
		t.Errorf("node stream %v", ns)
	}
	isTime("connectedAt", ns["connectedAt"])
	if lc := get("/lifecycle", 200); lc["deregistrationDelay"] != "300ms" || lc["cacheExpiration"] != "50ms" || lc["egressPropagation"] != "100ms" {
		t.Errorf("lifecycle %v", lc)
	}
	if st, got, _ := adminDo(t, s, "PUT", "/faults", `{"hang":true}`); st != 200 || !strings.Contains(got, `"hang":true`) || !s.currentFaults().Hang {
		t.Errorf("PUT /faults hang: %d %s", st, got)
	}
	adminDo(t, s, "PUT", "/faults", `{}`)
}

func TestAHungServerStillRestartsAndCloses(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	node, tok := egressNode(t, s, "zp-egress-1")
	c := dialADS(t, s, tok, node)
	c.collect(hasAll(resourcev3.ListenerType, egressLDS))
	s.SetFaults(Faults{Hang: true})
	pending, err := net.Dial("tcp", s.Addr()) // a handshake the server holds
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Close()
	go func() { _ = tls.Client(pending, &tls.Config{InsecureSkipVerify: true}).Handshake() }()

	for _, step := range []struct {
		name string
		do   func() error
	}{
		{"restart", func() error { return s.Restart(0) }},
		{"close", s.Close},
	} {
		done := make(chan error, 1)
		go func() { done <- step.do() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s blocked on the hung connections", step.name)
		}
	}
	select {
	case <-c.errc:
	case <-time.After(5 * time.Second):
		t.Error("the stream survived the restart")
	}
}
