package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	healthv3 "github.com/envoyproxy/go-control-plane/envoy/service/health/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// hdsClient is Envoy's HdsDelegate: it announces its health check
// capabilities, then reports endpoint health at the interval the server
// asks for. Checks here are one TCP connect (or HTTP GET) per report.
type hdsClient struct {
	s      *server
	target *grpcTarget
}

func newHDSClient(s *server) (*hdsClient, error) {
	hc := s.boot.GetHdsConfig()
	if hc == nil {
		return nil, nil
	}
	t, err := newGRPCTarget(s, hc.GetGrpcServices()[0])
	if err != nil {
		return nil, err
	}
	// HdsDelegate's retry: 1 s base, 30 s max.
	t.backoffBase, t.backoffMax = time.Second, 30*time.Second
	return &hdsClient{s: s, target: t}, nil
}

func (h *hdsClient) run(ctx context.Context) {
	bo := &jitteredBackoff{base: h.target.backoffBase, max: h.target.backoffMax, next: h.target.backoffBase}
	for {
		if h.session(ctx) {
			bo.reset()
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(bo.nextDelay()):
		}
	}
}

func (h *hdsClient) logClose(code codes.Code, msg string) {
	h.s.log.upstream(lvlWarn, "source/common/upstream/health_discovery_service.cc:320",
		"StreamHealthCheck gRPC config stream closed: %d, %s", int(code), msg)
}

func (h *hdsClient) session(ctx context.Context) (received bool) {
	conn, err := h.target.connect()
	if err != nil {
		h.logClose(codes.Unavailable, err.Error())
		return false
	}
	defer conn.Close()
	md, err := h.target.md()
	if err != nil {
		h.logClose(codes.Unauthenticated, err.Error())
		return false
	}
	sctx, cancel := context.WithCancel(withMD(ctx, md))
	defer cancel()
	stream, err := healthv3.NewHealthDiscoveryServiceClient(conn).StreamHealthCheck(sctx)
	if err != nil {
		st := grpcstatus.Convert(err)
		h.logClose(st.Code(), st.Message())
		return false
	}
	req := &healthv3.HealthCheckRequestOrEndpointHealthResponse{RequestType: &healthv3.HealthCheckRequestOrEndpointHealthResponse_HealthCheckRequest{
		HealthCheckRequest: &healthv3.HealthCheckRequest{
			Node:       h.s.wireNode(),
			Capability: &healthv3.Capability{HealthCheckProtocols: []healthv3.Capability_Protocol{healthv3.Capability_HTTP, healthv3.Capability_TCP}},
		},
	}}
	if err := stream.Send(req); err != nil {
		return false
	}
	specs := make(chan *healthv3.HealthCheckSpecifier, 1)
	errs := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				errs <- err
				return
			}
			select {
			case <-specs:
			default:
			}
			specs <- m
		}
	}()
	var spec *healthv3.HealthCheckSpecifier
	var tick <-chan time.Time
	var ticker *time.Ticker
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return received
		case err := <-errs:
			if ctx.Err() == nil {
				st := grpcstatus.Convert(err)
				h.logClose(st.Code(), st.Message())
			}
			return received
		case spec = <-specs:
			received = true
			h.s.log.upstream(lvlDebug, "source/common/upstream/health_discovery_service.cc:250", "New health check specifier with %d cluster(s)", len(spec.GetClusterHealthChecks()))
			interval := time.Second
			if spec.GetInterval() != nil && spec.GetInterval().AsDuration() > 0 {
				interval = spec.GetInterval().AsDuration()
			}
			if ticker != nil {
				ticker.Stop()
			}
			ticker = time.NewTicker(interval)
			tick = ticker.C
		case <-tick:
			resp := &healthv3.HealthCheckRequestOrEndpointHealthResponse{RequestType: &healthv3.HealthCheckRequestOrEndpointHealthResponse_EndpointHealthResponse{
				EndpointHealthResponse: checkAll(ctx, spec),
			}}
			if err := stream.Send(resp); err != nil {
				return received
			}
		}
	}
}

func checkAll(ctx context.Context, spec *healthv3.HealthCheckSpecifier) *healthv3.EndpointHealthResponse {
	out := &healthv3.EndpointHealthResponse{}
	for _, c := range spec.GetClusterHealthChecks() {
		ceh := &healthv3.ClusterEndpointsHealth{ClusterName: c.GetClusterName()}
		for _, le := range c.GetLocalityEndpoints() {
			leh := &healthv3.LocalityEndpointsHealth{Locality: le.GetLocality()}
			for _, ep := range le.GetEndpoints() {
				leh.EndpointsHealth = append(leh.EndpointsHealth, &healthv3.EndpointHealth{
					Endpoint:     ep,
					HealthStatus: checkEndpoint(ctx, ep, c.GetHealthChecks()),
				})
			}
			ceh.LocalityEndpointsHealth = append(ceh.LocalityEndpointsHealth, leh)
		}
		out.ClusterEndpointsHealth = append(out.ClusterEndpointsHealth, ceh)
	}
	return out
}

func checkEndpoint(ctx context.Context, ep *endpointv3.Endpoint, checks []*corev3.HealthCheck) corev3.HealthStatus {
	sa := ep.GetAddress().GetSocketAddress()
	if sa == nil {
		return corev3.HealthStatus_UNKNOWN
	}
	addr := net.JoinHostPort(sa.GetAddress(), fmt.Sprint(sa.GetPortValue()))
	for _, hc := range checks {
		timeout := time.Second
		if hc.GetTimeout() != nil {
			timeout = hc.GetTimeout().AsDuration()
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		ok := false
		if hh := hc.GetHttpHealthCheck(); hh != nil {
			req, err := http.NewRequestWithContext(cctx, http.MethodGet, "http://"+addr+hh.GetPath(), nil)
			if err == nil {
				if hh.GetHost() != "" {
					req.Host = hh.GetHost()
				}
				if resp, err := http.DefaultClient.Do(req); err == nil {
					ok = resp.StatusCode == http.StatusOK
					resp.Body.Close()
				}
			}
		} else {
			var d net.Dialer
			if c, err := d.DialContext(cctx, "tcp", addr); err == nil {
				ok = true
				c.Close()
			}
		}
		cancel()
		if !ok {
			return corev3.HealthStatus_UNHEALTHY
		}
	}
	return corev3.HealthStatus_HEALTHY
}
