package xdsrelay

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// snapshot1MB is a delta response of 1000 listeners of about 1 KiB each.
func snapshot1MB(b *testing.B) []byte {
	resp := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: listenerType, SystemVersionInfo: "1", Nonce: "n"}
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("listener-%04d", i)
		resp.Resources = append(resp.Resources, &discoveryv3.Resource{Name: name, Version: "1", Resource: listener(b, name, 1000)})
	}
	return mustMarshal(b, resp)
}

// pingPongCP answers every request with resp.
func pingPongCP(b *testing.B, p *pki, resp []byte) *fakeCP {
	return startFakeCP(b, p, "", func(s *cpStream) error {
		for {
			if _, err := s.recv(); err != nil {
				return nil
			}
			if err := s.send(resp); err != nil {
				return nil
			}
		}
	})
}

// runPingPong receives n responses on stream, ACKing each.
func runPingPong(b *testing.B, stream grpc.ClientStream, size int) {
	first := mustMarshal(b, &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: listenerType})
	ack := mustMarshal(b, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, ResponseNonce: "n"})
	if err := stream.SendMsg(&frame{b: first}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		f := &frame{}
		if err := stream.RecvMsg(f); err != nil {
			b.Fatal(err)
		}
		if err := stream.SendMsg(&frame{b: ack}); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "median-ns/op")
}

// BenchmarkDirect1MB is the baseline: Envoy's stream straight to the
// control plane over TLS. The relay's overhead per response is
// BenchmarkRelay1MB minus this.
func BenchmarkDirect1MB(b *testing.B) {
	p := newPKI(b)
	resp := snapshot1MB(b)
	cp := pingPongCP(b, p, resp)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	conn, err := grpc.NewClient("passthrough:///"+cp.addr, append(envoyDialOptions(),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})))...)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, deltaMethod)
	if err != nil {
		b.Fatal(err)
	}
	runPingPong(b, stream, len(resp))
}

// BenchmarkRelay1MB: the same through the relay, which decodes each
// response, tracks what Envoy holds and hands it to the cache writer.
func BenchmarkRelay1MB(b *testing.B) {
	for _, withCache := range []bool{false, true} {
		b.Run(fmt.Sprintf("cache=%t", withCache), func(b *testing.B) {
			p := newPKI(b)
			resp := snapshot1MB(b)
			cp := pingPongCP(b, p, resp)
			r := startRelay(b, p, cp.addr, staticToken("tok"), nil, func(o *Options) {
				if withCache {
					o.Cache = openCache(b, b.TempDir())
				}
				o.Log = nil
			})
			envoy := dialEnvoy(b, r, deltaMethod)
			runPingPong(b, envoy.stream, len(resp))
		})
	}
}
