package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// adsClient is Envoy's ADS gRPC mux: one bidi stream, delta or
// state-of-the-world, re-established with jittered exponential backoff.
type adsClient struct {
	s             *server
	target        *grpcTarget
	delta         bool
	nodeFirstOnly bool
	waitingLogged string
	dumpHeaders   bool // ENVOY_STANDIN_DUMP_ADS_HEADERS
}

func newADSClient(s *server) (*adsClient, error) {
	ads := s.boot.GetDynamicResources().GetAdsConfig()
	if ads == nil {
		return nil, nil
	}
	t, err := newGRPCTarget(s, ads.GetGrpcServices()[0])
	if err != nil {
		return nil, err
	}
	delta := ads.GetApiType() == corev3.ApiConfigSource_DELTA_GRPC || ads.GetApiType() == corev3.ApiConfigSource_AGGREGATED_DELTA_GRPC
	return &adsClient{s: s, target: t, delta: delta, nodeFirstOnly: ads.GetSetNodeOnFirstMessageOnly()}, nil
}

func (c *adsClient) method() string {
	if c.delta {
		return "DeltaAggregatedResources"
	}
	return "StreamAggregatedResources"
}

type jitteredBackoff struct{ base, max, next time.Duration }

// nextDelay follows JitteredExponentialBackOffStrategy: uniform in
// [0, interval), the interval doubling up to max.
func (b *jitteredBackoff) nextDelay() time.Duration {
	cur := b.next
	if b.next < b.max/2 {
		b.next *= 2
	} else {
		b.next = b.max
	}
	if cur <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(cur)))
}

func (b *jitteredBackoff) reset() { b.next = b.base }

func (c *adsClient) run(ctx context.Context) {
	bo := &jitteredBackoff{base: c.target.backoffBase, max: c.target.backoffMax, next: c.target.backoffBase}
	for {
		if c.session(ctx) {
			bo.reset()
		}
		if ctx.Err() != nil {
			return
		}
		d := bo.nextDelay()
		c.s.log.config(lvlDebug, "source/extensions/config_subscription/grpc/grpc_stream.h:75", "%s gRPC stream to %s: retrying in %s", c.method(), c.target.name, d)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

func (c *adsClient) logClose(code codes.Code, msg string) {
	c.s.stats.gauge("control_plane.connected_state").set(0)
	lv := lvlWarn
	if code == codes.OK {
		lv = lvlDebug
	}
	c.s.log.config(lv, "source/extensions/config_subscription/grpc/grpc_stream.h:193",
		"%s gRPC config stream to %s closed: %d, %s", c.method(), c.target.name, int(code), msg)
}

type subState struct {
	wildcard bool
	names    map[string]bool
	version  string // SotW: last accepted
	nonce    string // SotW: last received
}

func (s *subState) list() []string {
	out := make([]string, 0, len(s.names))
	for n := range s.names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

type streamState struct {
	subs  map[string]*subState
	first bool
	send  func(proto.Message) error
}

type recvResult struct {
	msg proto.Message
	err error
}

// session runs one stream; it reports whether anything was received.
func (c *adsClient) session(ctx context.Context) (received bool) {
	s := c.s
	s.log.config(lvlDebug, "source/extensions/config_subscription/grpc/grpc_stream.h:64",
		"Establishing new gRPC bidi stream to %s for rpc %s(stream .envoy.service.discovery.v3.%sRequest) returns (stream .envoy.service.discovery.v3.%sResponse);",
		c.target.name, c.method(), c.reqName(), c.reqName())
	conn, err := c.target.connect()
	if err != nil {
		var w *errWaitingForSecret
		if errors.As(err, &w) {
			// The cluster never becomes ready; Envoy never opens the stream.
			if c.waitingLogged != w.name {
				s.log.upstream(lvlWarn, "source/common/upstream/cluster_manager_impl.cc:1395", "cluster '%s' is %s", c.target.name, err)
				c.waitingLogged = w.name
			}
			return false
		}
		c.logClose(codes.Unavailable, "upstream connect error or disconnect/reset before headers. reset reason: connection failure, transport failure reason: "+err.Error())
		return false
	}
	defer conn.Close()
	md, err := c.target.md()
	if err != nil {
		// gRPC fails the call when a credentials plugin fails.
		c.logClose(codes.Unavailable, "Getting metadata from plugin failed with error: "+err.Error())
		return false
	}
	// Only Envoy's own async client goes through the router, which dumps
	// headers; google_grpc's C++ client does not.
	if c.dumpHeaders && c.target.viaRouter {
		c.logRequestHeaders(md)
	}
	sctx, cancel := context.WithCancel(withMD(ctx, md))
	defer cancel()
	client := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn)
	recv := make(chan recvResult, 16)
	st := &streamState{subs: map[string]*subState{}, first: true}
	if c.delta {
		stream, err := client.DeltaAggregatedResources(sctx)
		if err != nil {
			st := grpcstatus.Convert(err)
			c.logClose(st.Code(), st.Message())
			return false
		}
		st.send = func(m proto.Message) error { return stream.Send(m.(*discoverygrpc.DeltaDiscoveryRequest)) }
		go pump(stream.Recv, recv)
	} else {
		stream, err := client.StreamAggregatedResources(sctx)
		if err != nil {
			st := grpcstatus.Convert(err)
			c.logClose(st.Code(), st.Message())
			return false
		}
		st.send = func(m proto.Message) error { return stream.Send(m.(*discoverygrpc.DiscoveryRequest)) }
		go pump(stream.Recv, recv)
	}
	s.stats.gauge("control_plane.connected_state").set(1)
	s.log.config(lvlInfo, "source/extensions/config_subscription/grpc/grpc_stream.h:70", "%s gRPC config stream to %s established", c.method(), c.target.name)
	c.sync(st)
	for {
		select {
		case <-ctx.Done():
			return received
		case <-s.kick:
			c.sync(st)
		case r := <-recv:
			if r.err != nil {
				if ctx.Err() != nil {
					return received
				}
				gst := grpcstatus.Convert(r.err)
				c.logClose(gst.Code(), gst.Message())
				return received
			}
			received = true
			if c.delta {
				c.handleDelta(st, r.msg.(*discoverygrpc.DeltaDiscoveryResponse))
			} else {
				c.handleSotw(st, r.msg.(*discoverygrpc.DiscoveryResponse))
			}
			c.sync(st)
		}
	}
}

// logRequestHeaders writes the stream's request headers the way Envoy's
// router does at debug level: one multi-line entry, values unredacted.
func (c *adsClient) logRequestHeaders(md metadata.MD) {
	var b strings.Builder
	b.WriteString("router decoding headers:")
	for _, kv := range [][2]string{
		{":method", "POST"},
		{":path", "/envoy.service.discovery.v3.AggregatedDiscoveryService/" + c.method()},
		{":authority", c.target.authority},
		{":scheme", "http"},
		{"te", "trailers"},
		{"content-type", "application/grpc"},
	} {
		fmt.Fprintf(&b, "\n'%s', '%s'", kv[0], kv[1])
	}
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range md[k] {
			fmt.Fprintf(&b, "\n'%s', '%s'", k, v)
		}
	}
	b.WriteString("\n'x-envoy-internal', 'true'")
	c.s.log.logf(lvlDebug, "router", "source/common/router/router.cc:738", "[Tags: \"ConnectionId\":\"0\",\"StreamId\":\"%d\"] %s", rand.Uint64(), b.String())
}

func (c *adsClient) reqName() string {
	if c.delta {
		return "DeltaDiscovery"
	}
	return "Discovery"
}

// wireNode is the bootstrap node plus what Envoy adds about itself.
func (s *server) wireNode() *corev3.Node {
	n := proto.Clone(s.node).(*corev3.Node)
	n.UserAgentName = "envoy"
	md, _ := structpb.NewStruct(map[string]any{
		"revision.sha":    envoyRevision,
		"revision.status": "Clean",
		"build.type":      "RELEASE",
		"ssl.version":     "BoringSSL",
	})
	n.UserAgentVersionType = &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{
		Version:  &typev3.SemanticVersion{MajorNumber: 1, MinorNumber: 39, Patch: 0},
		Metadata: md,
	}}
	n.ClientFeatures = []string{"envoy.lb.does_not_support_overprovisioning", "envoy.lrs.supports_send_all_clusters"}
	return n
}

func (c *adsClient) send(st *streamState, m proto.Message) {
	if st.first || !c.nodeFirstOnly {
		node := c.s.wireNode()
		switch r := m.(type) {
		case *discoverygrpc.DeltaDiscoveryRequest:
			r.Node = node
		case *discoverygrpc.DiscoveryRequest:
			r.Node = node
		}
	}
	st.first = false
	// A failed send surfaces as the stream's Recv error.
	_ = st.send(m)
}

// sync brings the stream's subscriptions to what the server wants now.
func (c *adsClient) sync(st *streamState) {
	order, want := c.s.subscriptions()
	for _, typ := range order {
		w, ok := want[typ]
		if !ok {
			continue
		}
		sub := st.subs[typ]
		if sub == nil {
			if !w.wildcard && len(w.names) == 0 {
				continue
			}
			sub = &subState{wildcard: w.wildcard, names: map[string]bool{}}
			for _, n := range w.names {
				sub.names[n] = true
			}
			st.subs[typ] = sub
			if c.delta {
				req := &discoverygrpc.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: w.names}
				if v := c.s.knownVersions(typ); len(v) > 0 {
					if !w.wildcard {
						for n := range v {
							if !sub.names[n] {
								delete(v, n)
							}
						}
					}
					req.InitialResourceVersions = v
				}
				c.send(st, req)
			} else {
				sub.version = c.s.acceptedVersion(typ)
				c.send(st, &discoverygrpc.DiscoveryRequest{TypeUrl: typ, ResourceNames: w.names, VersionInfo: sub.version})
			}
			continue
		}
		if sub.wildcard {
			continue
		}
		var add, remove []string
		wantSet := map[string]bool{}
		for _, n := range w.names {
			wantSet[n] = true
			if !sub.names[n] {
				add = append(add, n)
			}
		}
		for n := range sub.names {
			if !wantSet[n] {
				remove = append(remove, n)
			}
		}
		if len(add)+len(remove) == 0 {
			continue
		}
		sort.Strings(remove)
		sub.names = wantSet
		if c.delta {
			c.send(st, &discoverygrpc.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: add, ResourceNamesUnsubscribe: remove})
		} else {
			c.send(st, &discoverygrpc.DiscoveryRequest{TypeUrl: typ, ResourceNames: sub.list(), VersionInfo: sub.version, ResponseNonce: sub.nonce})
		}
	}
}

func (s *server) acceptedVersion(typ string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versionInfo[typ]
}

func newMessageFor(typ string) proto.Message {
	switch typ {
	case typeCluster:
		return &clusterv3.Cluster{}
	case typeEndpoint:
		return &endpointv3.ClusterLoadAssignment{}
	case typeListener:
		return &listenerv3.Listener{}
	case typeRoute:
		return &routev3.RouteConfiguration{}
	case typeSecret:
		return &tlsv3.Secret{}
	}
	return nil
}

func resourceName(m proto.Message) string {
	switch r := m.(type) {
	case *clusterv3.Cluster:
		return r.GetName()
	case *endpointv3.ClusterLoadAssignment:
		return r.GetClusterName()
	case *listenerv3.Listener:
		return r.GetName()
	case *routev3.RouteConfiguration:
		return r.GetName()
	case *tlsv3.Secret:
		return r.GetName()
	}
	return ""
}

func unpackResource(typ string, a *anypb.Any) (proto.Message, error) {
	m := newMessageFor(typ)
	if m == nil {
		return nil, fmt.Errorf("unsupported type %s", typ)
	}
	if err := (proto.UnmarshalOptions{Resolver: typeResolver}).Unmarshal(a.GetValue(), m); err != nil {
		return nil, fmt.Errorf("Unable to unpack as %s: %s", typeName(typ), trimProtoErr(err))
	}
	return m, nil
}

func (c *adsClient) handleDelta(st *streamState, resp *discoverygrpc.DeltaDiscoveryResponse) {
	typ := resp.GetTypeUrl()
	if st.subs[typ] == nil {
		c.s.log.config(lvlWarn, "source/extensions/config_subscription/grpc/new_grpc_mux_impl.cc:140",
			"Dropping received DeltaDiscoveryResponse (with version %s) for non-existent subscription %s.", resp.GetSystemVersionInfo(), typ)
		return
	}
	c.s.log.config(lvlDebug, "source/extensions/config_subscription/grpc/grpc_stream.h:236", "Received gRPC message for %s at version %s", typ, resp.GetSystemVersionInfo())
	if id := resp.GetControlPlane().GetIdentifier(); id != "" {
		c.s.stats.textReadout("control_plane.identifier").setText(id)
	}
	u := &update{typ: typ, version: resp.GetSystemVersionInfo(), removed: resp.GetRemovedResources()}
	for _, r := range resp.GetResources() {
		if r.GetResource() == nil {
			continue
		}
		if r.GetResource().GetTypeUrl() != typ {
			u.unpackError = append(u.unpackError, fmt.Sprintf("type URL %s embedded in an individual Any does not match the message-wide type URL %s in DeltaDiscoveryResponse", r.GetResource().GetTypeUrl(), typ))
			continue
		}
		m, err := unpackResource(typ, r.GetResource())
		if err != nil {
			u.unpackError = append(u.unpackError, err.Error())
			continue
		}
		name := r.GetName()
		if name == "" {
			name = resourceName(m)
		}
		u.resources = append(u.resources, incoming{name: name, version: r.GetVersion(), msg: m, raw: r.GetResource()})
	}
	nack := c.s.apply(u)
	req := &discoverygrpc.DeltaDiscoveryRequest{TypeUrl: typ, ResponseNonce: resp.GetNonce()}
	if nack != "" {
		c.s.log.config(lvlWarn, "source/extensions/config_subscription/grpc/delta_subscription_state.cc:260", "delta config for %s rejected: %s", typ, nack)
		req.ErrorDetail = &status.Status{Code: int32(codes.Internal), Message: nack}
	}
	c.send(st, req)
}

func (c *adsClient) handleSotw(st *streamState, resp *discoverygrpc.DiscoveryResponse) {
	typ := resp.GetTypeUrl()
	sub := st.subs[typ]
	if sub == nil {
		c.s.log.config(lvlWarn, "source/extensions/config_subscription/grpc/grpc_mux_impl.cc:260",
			"Ignoring the message for type URL %s as it has no current subscribers.", typ)
		return
	}
	c.s.log.config(lvlDebug, "source/extensions/config_subscription/grpc/grpc_stream.h:236", "Received gRPC message for %s at version %s", typ, resp.GetVersionInfo())
	sub.nonce = resp.GetNonce()
	if id := resp.GetControlPlane().GetIdentifier(); id != "" {
		c.s.stats.textReadout("control_plane.identifier").setText(id)
	}
	u := &update{typ: typ, version: resp.GetVersionInfo()}
	got := map[string]bool{}
	for _, a := range resp.GetResources() {
		if a.GetTypeUrl() != typ {
			u.unpackError = append(u.unpackError, fmt.Sprintf("%s does not match the message-wide type URL %s in DiscoveryResponse", a.GetTypeUrl(), typ))
			continue
		}
		m, err := unpackResource(typ, a)
		if err != nil {
			u.unpackError = append(u.unpackError, err.Error())
			continue
		}
		n := resourceName(m)
		got[n] = true
		u.resources = append(u.resources, incoming{name: n, version: resp.GetVersionInfo(), msg: m, raw: a})
	}
	if sub.wildcard && len(u.unpackError) == 0 {
		for _, n := range c.s.dynamicNames(typ) {
			if !got[n] {
				u.removed = append(u.removed, n)
			}
		}
	}
	nack := c.s.apply(u)
	req := &discoverygrpc.DiscoveryRequest{TypeUrl: typ, ResponseNonce: resp.GetNonce(), ResourceNames: sub.list()}
	if nack == "" {
		sub.version = resp.GetVersionInfo()
	} else {
		c.s.log.config(lvlWarn, "source/extensions/config_subscription/grpc/grpc_mux_impl.cc:277", "gRPC config for %s rejected: %s", typ, nack)
		req.ErrorDetail = &status.Status{Code: int32(codes.Internal), Message: nack}
	}
	req.VersionInfo = sub.version
	c.send(st, req)
}

func withMD(ctx context.Context, md metadata.MD) context.Context {
	return metadata.NewOutgoingContext(ctx, md)
}

// pump forwards a stream's messages to recv until the stream fails.
func pump[M proto.Message](next func() (M, error), recv chan<- recvResult) {
	for {
		m, err := next()
		recv <- recvResult{m, err}
		if err != nil {
			return
		}
	}
}
