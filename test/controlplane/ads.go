package controlplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	healthv3 "github.com/envoyproxy/go-control-plane/envoy/service/health/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	deltav3 "github.com/envoyproxy/go-control-plane/pkg/server/delta/v3"
	restv3 "github.com/envoyproxy/go-control-plane/pkg/server/rest/v3"
	sotwv3 "github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

const alreadyActiveText = "there is already an active stream from this node, try again later"

// adsStream is one delta ADS stream.
type adsStream struct {
	ctx context.Context
	// epochDone is s.epochDone when the stream opened: closed by a
	// restart, after which the stream belongs to a CP process that is gone.
	epochDone  <-chan struct{}
	nodeID     string // set once the first node was accepted
	registered bool   // holds s.active[nodeID]
	upserted   dpKey  // the Dataplane its registration upserted ({} if none): closing deregisters it
	protocol   string // ProtocolDelta or ProtocolSotW
}

// The ADS protocols, as ProxyInfo.Protocol names them.
const (
	ProtocolDelta = "delta"
	ProtocolSotW  = "SotW"
)

// orphaned reports whether a restart happened since the stream opened.
func (st *adsStream) orphaned() bool {
	select {
	case <-st.epochDone:
		return true
	default:
		return false
	}
}

func (s *Server) setupXDS() {
	s.xdsCache = cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	cb := &adsCallbacks{s: s, ids: newStreamIDs()}
	// kuma-cp 2.14.3 orders SotW ADS responses (sotw.WithOrderedADS);
	// delta keeps what 3.0 mode always did.
	s.xdsServer = serverv3.NewServerAdvanced(restv3.NewServer(s.xdsCache, cb),
		sotwv3.NewServer(s.ctx, s.xdsCache, cb, sotwv3.WithOrderedADS()),
		deltav3.NewServer(s.ctx, s.xdsCache, cb))
	s.grpcServer = grpc.NewServer(grpc.MaxConcurrentStreams(1_000_000))
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(s.grpcServer, &adsService{s: s})
	healthv3.RegisterHealthDiscoveryServiceServer(s.grpcServer, &hdsService{s: s})
}

// adsService serves delta ADS through go-control-plane, and SotW in 2.14
// mode. In 3.0 mode a SotW stream is refused as gRPC refuses a method it
// does not register (kumahq/kuma#17040: 3.0 serves delta only), or, with
// Options.SotWNeverAnswered, accepted and never answered: kuma-cp master
// 348b6528 still registers SotW but wires no callbacks for it, so it never
// serves config there. 2.14.3 wires the same callbacks for both.
type adsService struct {
	discoverygrpc.UnimplementedAggregatedDiscoveryServiceServer
	s *Server
}

func (a *adsService) StreamAggregatedResources(stream discoverygrpc.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	if a.s.servesSotW() {
		return a.s.xdsServer.StreamAggregatedResources(stream)
	}
	if !a.s.opts.SotWNeverAnswered {
		a.s.log.printf("ads: SotW stream refused: kuma-cp %s serves delta ADS only", a.s.KumaVersion())
		return sotwUnimplemented
	}
	a.s.log.printf("ads: SotW stream opened; it is never served (use DELTA_GRPC)")
	for {
		if _, err := stream.Recv(); err != nil {
			return nil
		}
	}
}

func (a *adsService) DeltaAggregatedResources(stream discoverygrpc.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	return a.s.xdsServer.DeltaAggregatedResources(stream)
}

// hdsService authenticates HDS streams like ADS and then holds them open
// without assigning health checks.
type hdsService struct {
	healthv3.UnimplementedHealthDiscoveryServiceServer
	s *Server
}

func (h *hdsService) StreamHealthCheck(stream grpc.BidiStreamingServer[healthv3.HealthCheckRequestOrEndpointHealthResponse, healthv3.HealthCheckSpecifier]) error {
	first, err := stream.Recv()
	if err != nil {
		return nil
	}
	node := first.GetHealthCheckRequest().GetNode()
	dp, err := h.s.authenticate(stream.Context(), node)
	if err == nil {
		err = checkProxy(node, dp)
	}
	if err != nil {
		h.s.log.printf("hds: stream rejected node=%s: %v", node.GetId(), err)
		return err
	}
	h.s.log.printf("hds: stream opened node=%s", node.GetId())
	for {
		if _, err := stream.Recv(); err != nil {
			h.s.log.printf("hds: stream closed node=%s", node.GetId())
			return nil
		}
	}
}

// adsCallbacks are kuma-cp's callbacks, the same for SotW and delta
// streams; each protocol's stream ids are mapped to the control plane's.
type adsCallbacks struct {
	s   *Server
	ids *streamIDs
}

var _ serverv3.Callbacks = (*adsCallbacks)(nil)

// adsRequest is what SotW and delta requests have in common.
type adsRequest interface {
	GetNode() *corev3.Node
	GetTypeUrl() string
	GetResponseNonce() string
	GetErrorDetail() *rpcstatus.Status
}

// SotW streams (served in 2.14 mode only).
func (c *adsCallbacks) OnStreamOpen(ctx context.Context, id int64, _ string) error {
	return c.opened(ctx, sotwStreams, id)
}
func (c *adsCallbacks) OnStreamClosed(id int64, _ *corev3.Node) {
	c.s.closeStream(c.ids.close(sotwStreams, id))
}
func (c *adsCallbacks) OnStreamRequest(id int64, req *discoverygrpc.DiscoveryRequest) error {
	return c.request(sotwStreams, id, req)
}
func (c *adsCallbacks) OnStreamResponse(_ context.Context, id int64, _ *discoverygrpc.DiscoveryRequest, resp *discoverygrpc.DiscoveryResponse) {
	names := make([]string, 0, len(resp.GetResources()))
	for _, r := range resp.GetResources() {
		if m, err := r.UnmarshalNew(); err == nil {
			names = append(names, cachev3.GetResourceName(m))
		}
	}
	c.s.streamResponse(c.ids.get(sotwStreams, id), resp.GetTypeUrl(), resp.GetNonce(), names, nil)
}

func (c *adsCallbacks) OnFetchRequest(context.Context, *discoverygrpc.DiscoveryRequest) error {
	return errors.New("fetch is not supported")
}
func (c *adsCallbacks) OnFetchResponse(*discoverygrpc.DiscoveryRequest, *discoverygrpc.DiscoveryResponse) {
}

// Delta streams.
func (c *adsCallbacks) OnDeltaStreamOpen(ctx context.Context, id int64, _ string) error {
	return c.opened(ctx, deltaStreams, id)
}
func (c *adsCallbacks) OnDeltaStreamClosed(id int64, _ *corev3.Node) {
	c.s.closeStream(c.ids.close(deltaStreams, id))
}
func (c *adsCallbacks) OnStreamDeltaRequest(id int64, req *discoverygrpc.DeltaDiscoveryRequest) error {
	if err := c.request(deltaStreams, id, req); err != nil {
		return err
	}
	if req.GetTypeUrl() == resourcev3.ListenerType && len(req.GetInitialResourceVersions()) > 0 {
		// A resumed stream: Envoy holds these already, and is sent only
		// what changed.
		c.s.heldListeners(c.ids.get(deltaStreams, id), slices.Collect(maps.Keys(req.GetInitialResourceVersions())))
	}
	return nil
}
func (c *adsCallbacks) OnStreamDeltaResponse(id int64, _ *discoverygrpc.DeltaDiscoveryRequest, resp *discoverygrpc.DeltaDiscoveryResponse) {
	names := make([]string, 0, len(resp.GetResources()))
	for _, r := range resp.GetResources() {
		names = append(names, r.GetName())
	}
	c.s.streamResponse(c.ids.get(deltaStreams, id), resp.GetTypeUrl(), resp.GetNonce(), names, resp.GetRemovedResources())
}

func (c *adsCallbacks) opened(ctx context.Context, p streamProtocol, goID int64) error {
	return c.s.openStream(ctx, c.ids.open(p, goID), p.String())
}

func (c *adsCallbacks) request(p streamProtocol, goID int64, req adsRequest) error {
	return c.s.streamRequest(c.ids.get(p, goID), req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
}

// openStream registers a new ADS stream; delta's log line is 3.0 mode's.
func (s *Server) openStream(ctx context.Context, id int64, protocol string) error {
	s.mu.Lock()
	if s.down {
		s.mu.Unlock()
		return errRestarted
	}
	s.streams[id] = &adsStream{ctx: ctx, epochDone: s.epochDone, protocol: protocol}
	s.mu.Unlock()
	if protocol == ProtocolSotW {
		s.log.printf("ads: stream %d opened (SotW)", id)
	} else {
		s.log.printf("ads: stream %d opened", id)
	}
	return nil
}

// closeStream is kuma-cp's onStreamClosed: for the stream holding
// its node it runs DataplaneLifecycle.OnProxyDisconnected (the
// deregistration delay, inline, then the delete) BEFORE it releases the
// node, so the node refuses new streams until then. Like kuma-cp it
// blocks the stream's handler meanwhile.
func (s *Server) closeStream(id int64) {
	s.mu.Lock()
	st := s.streams[id]
	delete(s.streams, id)
	if st == nil || !st.registered || st.orphaned() || s.active[st.nodeID] != id {
		s.mu.Unlock()
		if st != nil && st.nodeID != "" {
			s.log.printf("ads: stream %d closed node=%s", id, st.nodeID)
		} else {
			s.log.printf("ads: stream %d closed", id)
		}
		return
	}
	ns := s.nodeLocked(st.nodeID)
	ns.connected = false
	if p := s.proxies[st.nodeID]; p != nil {
		p.info.Connected = false
	}
	if st.upserted == (dpKey{}) || s.ctx.Err() != nil {
		// Nothing registered (no proxyInfo in kuma-cp), or a graceful
		// shutdown: released at once, nothing deleted.
		s.releaseLocked(st.nodeID, id)
		s.mu.Unlock()
		s.log.printf("ads: stream %d closed node=%s", id, st.nodeID)
		return
	}
	ns.deregSince = time.Now()
	delay := s.timings.DeregistrationDelay
	s.mu.Unlock()
	s.log.printf("ads: stream %d closed node=%s; the node stays active until its deregistration in %s", id, st.nodeID, delay)

	if !s.pause(delay, st.epochDone) {
		s.log.printf("ads: node=%s deregistration of stream %d dropped (control plane restarted or stopped); Dataplane kept", st.nodeID, id)
		return
	}
	s.mu.Lock()
	if st.orphaned() {
		s.mu.Unlock()
		s.log.printf("ads: node=%s deregistration of stream %d dropped (control plane restarted); Dataplane kept", st.nodeID, id)
		return
	}
	deleted := s.deleteDataplaneLocked(st.upserted, id, "deregistered")
	s.releaseLocked(st.nodeID, id)
	s.mu.Unlock()
	if deleted {
		s.log.printf("ads: node=%s deregistered: Dataplane %s/%s deleted, node released", st.nodeID, st.upserted.mesh, st.upserted.name)
	} else {
		s.log.printf("ads: node=%s deregistered: Dataplane %s/%s was already gone, node released", st.nodeID, st.upserted.mesh, st.upserted.name)
	}
}

// releaseLocked frees a node held by stream id.
func (s *Server) releaseLocked(nodeID string, id int64) {
	if s.active[nodeID] == id {
		delete(s.active, nodeID)
	}
	ns := s.nodeLocked(nodeID)
	if ns.stream == id {
		ns.stream = 0
		ns.connected = false
		ns.deregSince = time.Time{}
	}
}

// pause waits d like a timer of kuma-cp: a frozen CP (the Hang fault)
// runs none, so it also waits for the thaw. False if the CP restarted
// (epochDone) or stopped meanwhile.
func (s *Server) pause(d time.Duration, epochDone <-chan struct{}) bool {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-epochDone:
			return false
		case <-s.ctx.Done():
			return false
		}
	}
	return s.hang.wait(epochDone, s.ctx.Done())
}

// streamRequest runs the per-stream checks on a stream's first node and
// records ACKs and NACKs.
func (s *Server) streamRequest(id int64, node *corev3.Node, typeURL, nonce, nackMessage string, nack bool) error {
	s.mu.Lock()
	st := s.streams[id]
	s.mu.Unlock()
	if st == nil {
		return errors.New("unknown stream")
	}
	if reqID := node.GetId(); st.nodeID == "" {
		if err := s.connect(id, st, node); err != nil {
			s.log.printf("ads: stream %d rejected node=%s: %v", id, reqID, err)
			return err
		}
	} else if reqID != "" && reqID != st.nodeID {
		return fmt.Errorf("stream was authenticated for ID %s. Received request is for node with ID %s. Node ID cannot be changed after stream is initialized", st.nodeID, reqID)
	}

	if nonce != "" {
		if !nack {
			s.mu.Lock()
			if p := s.proxies[st.nodeID]; p != nil {
				p.acked[typeURL] = true
			}
			s.mu.Unlock()
			s.log.printf("ads: ACK node=%s type=%s nonce=%s", st.nodeID, shortType(typeURL), nonce)
		} else {
			s.log.printf("ads: NACK node=%s type=%s nonce=%s: %s", st.nodeID, shortType(typeURL), nonce, nackMessage)
		}
	}
	return nil
}

// heldListeners records the listeners a resumed stream says Envoy holds.
func (s *Server) heldListeners(id int64, names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.streams[id]; st != nil {
		if p := s.proxies[st.nodeID]; p != nil {
			for _, n := range names {
				p.listeners[n] = true
			}
		}
	}
}

// streamResponse records the listeners a stream was sent.
func (s *Server) streamResponse(id int64, typeURL, nonce string, names, removed []string) {
	s.mu.Lock()
	st := s.streams[id]
	nodeID := ""
	if st != nil {
		nodeID = st.nodeID
		if p := s.proxies[nodeID]; p != nil && typeURL == resourcev3.ListenerType {
			for _, n := range names {
				p.listeners[n] = true
			}
		}
	}
	s.mu.Unlock()
	s.log.printf("ads: sent node=%s type=%s nonce=%s resources=%v removed=%v", nodeID, shortType(typeURL), nonce, names, removed)
}

func shortType(t string) string {
	if i := strings.LastIndex(t, "."); i >= 0 {
		return t[i+1:]
	}
	return t
}

// connect runs kuma-cp's per-stream checks in its callback order: auth
// (authCallbacks), one stream per node (DataplaneCallbacks), then
// DataplaneLifecycle.OnProxyConnected: proxy type, proxy id, and register
// (upsert the Dataplane, sleep CacheExpiration, count as connected). The
// first response waits for all of it. Then the node's snapshot is set.
func (s *Server) connect(id int64, st *adsStream, node *corev3.Node) error {
	dp, err := s.authenticate(st.ctx, node)
	if err != nil {
		return err
	}
	nodeID := node.GetId()
	s.mu.Lock()
	if st.orphaned() {
		s.mu.Unlock()
		return errRestarted
	}
	ns := s.nodeLocked(nodeID)
	if other, ok := s.active[nodeID]; ok && other != id {
		ns.refusals++
		ns.lastRefusal = time.Now()
		s.mu.Unlock()
		return errors.New(alreadyActiveText)
	}
	s.active[nodeID] = id
	st.nodeID = nodeID
	st.registered = true
	ns.stream = id
	ns.activeSince = time.Now()
	ns.connected = false
	ns.deregSince = time.Time{}
	ns.accepted++
	s.mu.Unlock()

	if err := checkProxy(node, dp); err != nil {
		return err
	}
	spec, err := dataplaneSpecJSON(node.GetMetadata().GetFields()["dataplane.resource"].GetStringValue())
	if err != nil { // parsed once already: cannot happen
		return errRegister(err)
	}
	s.mu.Lock()
	p := s.proxies[nodeID]
	if p == nil {
		p = &proxyState{}
		s.proxies[nodeID] = p
	}
	kumaDp := node.GetMetadata().GetFields()["version"].GetStructValue().GetFields()["kumaDp"].GetStructValue().GetFields()
	dpVersion := kumaDp["version"].GetStringValue()
	p.info = ProxyInfo{
		NodeID: nodeID, Version: kumaDp["gitTag"].GetStringValue(), Protocol: st.protocol,
		KumaDpVersion: dpVersion, KumaCpCompatible: deploymentVersionCompatible(s.KumaVersion(), dpVersion),
	}
	compatible := p.info.KumaCpCompatible
	p.acked = map[string]bool{}
	p.listeners = map[string]bool{}
	s.mu.Unlock()
	if !compatible {
		s.log.printf("ads: node=%s kumaDp version %q is not compatible with kuma-cp %s", nodeID, dpVersion, s.KumaVersion())
	}

	if err := s.upsertDataplane(st, id, dp, spec); err != nil {
		return err
	}
	st.upserted = dpKey{dp.Mesh, dp.Name}
	s.log.printf("ads: stream %d registered node=%s: Dataplane upserted; connected after %s", id, nodeID, s.timings.CacheExpiration)

	// DataplaneLifecycle.register: time.Sleep(cacheExpirationTime), inline.
	if !s.pause(s.timings.CacheExpiration, st.epochDone) {
		return errRestarted
	}
	s.mu.Lock()
	if st.orphaned() {
		s.mu.Unlock()
		return errRestarted
	}
	now := time.Now()
	ns.connected = true
	ns.connectedAt = now
	p.info.Connected = true
	p.info.ConnectedAt = now
	s.mu.Unlock()
	s.log.printf("ads: stream %d connected node=%s", id, nodeID)

	// Like kuma-cp: if xDS generation fails, the stream stays open, no config.
	s.setSnapshotFor(nodeID, dp, node, true)
	return nil
}

// authenticate checks a node like kuma-cp's auth callbacks (the
// Dataplane from the node metadata, then the credential) and returns its
// Dataplane.
func (s *Server) authenticate(ctx context.Context, node *corev3.Node) (*dataplane, error) {
	nodeID := node.GetId()
	mesh, name, ok := strings.Cut(nodeID, ".")
	if !ok || mesh == "" || name == "" {
		return nil, errors.New("request must have a valid Proxy ID")
	}
	fields := node.GetMetadata().GetFields()
	proxyType := fields["dataplane.proxyType"].GetStringValue()
	var dp *dataplane
	if res := fields["dataplane.resource"].GetStringValue(); res != "" {
		parsed, err := parseDataplane([]byte(res))
		if err != nil {
			s.log.printf("ads: node=%s could not parse dataplane.resource, ignoring it: %v", nodeID, err)
		} else {
			dp = parsed
		}
	}
	if dp == nil {
		if proxyType != "dataplane" {
			return nil, fmt.Errorf("unsupported proxy type %q", proxyType)
		}
		// kuma-cp would look the Dataplane up in its store; this CP
		// registers Dataplanes only from node metadata.
		return nil, fmt.Errorf("resource %q not found; create a Dataplane in Kuma CP first or pass it as an argument to kuma-dp", nodeID)
	}

	f := s.currentFaults()
	switch {
	case f.RejectADSAuth:
		return nil, fmt.Errorf("authentication failed: could not parse token. %s: token signature is invalid: crypto/rsa: verification error", tokenHint)
	case !s.opts.AuthDisabled:
		if err := s.checkCredential(ctx, dp); err != nil {
			return nil, fmt.Errorf("authentication failed: %w", err)
		}
	}
	return dp, nil
}

// checkProxy is DataplaneLifecycle.OnProxyConnected's checks before it
// registers: the proxy type, then the node id against the resource.
func checkProxy(node *corev3.Node, dp *dataplane) error {
	proxyType := node.GetMetadata().GetFields()["dataplane.proxyType"].GetStringValue()
	if proxyType != "dataplane" {
		return fmt.Errorf("unsupported proxy type %q, only \"dataplane\" is supported", proxyType)
	}
	if want := dp.Mesh + "." + dp.Name; node.GetId() != want {
		return fmt.Errorf("proxyId %s does not match proxy resource %s", node.GetId(), want)
	}
	return nil
}

func (s *Server) checkCredential(ctx context.Context, dp *dataplane) error {
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get("authorization")
	if len(values) > 1 {
		return errors.New("authorization metadata has to have exactly one value")
	}
	credential := ""
	if len(values) == 1 {
		credential = values[0]
	}
	claims, err := s.tokens.parse(credential)
	if err != nil {
		return err
	}
	return authorizeClaims(claims, dp)
}

// metaPort reads a decimal port string from node metadata (0 if absent).
func metaPort(node *corev3.Node, key string) (uint32, error) {
	v := node.GetMetadata().GetFields()[key].GetStringValue()
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: invalid port %q", key, v)
	}
	return uint32(n), nil
}
