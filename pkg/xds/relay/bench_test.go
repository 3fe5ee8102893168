package relay

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/mem"

	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// Benchmarks of a 1 MB xDS response and its ACK, straight from the
// control plane and through the relay. What they model:
//   - the control plane: a grpc-go server over TLS on loopback, with
//     grpc-go's defaults (kuma-cp is a grpc-go server), in this process;
//   - Envoy: a grpc-go client with the flow control Envoy's gRPC clusters
//     have by default, 256 MiB stream and connection windows and no BDP
//     probing (envoyDialOptions), so no window update waits on either
//     hop; like Envoy, it reads each response whole before ACKing it;
//   - the relay: as the agent runs it, over a Unix socket.
// Every response is a new version of all 1000 listeners, as after a
// change of each; one op is one response sent (the control plane waits
// for the op to start), received and its ACK sent.
// cpu-ms/op is the process's CPU time per op, all three parties and the
// GC together: on a shared machine the relay's CPU (relay minus direct)
// varies less than its wall time. gc/op is the GC cycles per op.

// snapshot1MB is a delta response of 1000 listeners of about 1 KiB each,
// all of version.
func snapshot1MB(b *testing.B, version string) []byte {
	resp := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: listenerType, SystemVersionInfo: version, Nonce: "n"}
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("listener-%04d", i)
		resp.Resources = append(resp.Resources, &discoveryv3.Resource{Name: name, Version: version, Resource: listener(b, name, 1000)})
	}
	return mustMarshal(b, resp)
}

// pingPongCP answers every request with the next of resps, in turn, each
// once go lets it: when an op starts, so that no part of a response
// travels before its op is timed.
func pingPongCP(b *testing.B, p *pki, send <-chan struct{}, resps ...[]byte) *fakeCP {
	return startFakeCP(b, p, "", func(s *cpStream) error {
		for i := 0; ; i++ {
			if _, err := s.recv(); err != nil {
				return nil
			}
			select {
			case <-send:
			case <-s.Context().Done():
				return nil
			}
			if err := s.send(resps[i%len(resps)]); err != nil {
				return nil
			}
		}
	})
}

// runPingPong receives n responses on stream, ACKing each; an op starts
// by letting the control plane send (send). settle, if set, runs between
// ops, untimed.
func runPingPong(b *testing.B, stream grpc.ClientStream, send chan<- struct{}, size int, settle func()) {
	first := mustMarshal(b, &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: listenerType})
	ack := mustMarshal(b, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, ResponseNonce: "n"})
	if err := stream.SendMsg(&frame{b: first}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	cpu, gcs := cpuTime(), gcCount()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		send <- struct{}{}
		f := &frame{}
		if err := stream.RecvMsg(f); err != nil {
			b.Fatal(err)
		}
		if err := stream.SendMsg(&frame{b: ack}); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		if settle != nil {
			b.StopTimer()
			settle()
			b.StartTimer()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(gcCount()-gcs)/float64(b.N), "gc/op")
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "median-ns/op")
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// gcCount is how many GC cycles this process has completed.
func gcCount() uint32 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.NumGC
}

// BenchmarkDirect1MB is the baseline: Envoy's stream straight to the
// control plane over TLS. The relay's overhead per response is
// BenchmarkRelay1MB minus this.
func BenchmarkDirect1MB(b *testing.B) {
	p := newPKI(b)
	resp := snapshot1MB(b, "1")
	send := make(chan struct{})
	cp := pingPongCP(b, p, send, resp, snapshot1MB(b, "2"))
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
	runPingPong(b, stream, send, len(resp), nil)
}

// BenchmarkRelay1MB: the same through the relay, which observes each
// response, tracks what Envoy holds and, with the cache (the agent's
// default), has it written behind.
//
// The relay reads a response once Envoy has answered it, so:
// back-to-back: each response follows the last ACK at once, and the
// relay reads one response while it forwards the next, sharing two cores
// with both peers: the relay's CPU shows in the wall time.
// settled: the next op starts once the relay has read the last response
// and its ACK, as with a real control plane, whose responses come seconds
// apart: the wait a response has because of the relay.
func BenchmarkRelay1MB(b *testing.B) {
	for _, withCache := range []bool{false, true} {
		for _, settled := range []bool{false, true} {
			name := fmt.Sprintf("cache=%t/back-to-back", withCache)
			if settled {
				name = fmt.Sprintf("cache=%t/settled", withCache)
			}
			b.Run(name, func(b *testing.B) {
				p := newPKI(b)
				resp := snapshot1MB(b, "1")
				send := make(chan struct{})
				cp := pingPongCP(b, p, send, resp, snapshot1MB(b, "2"))
				accepted := make(chan struct{}, 1)
				r := startRelay(b, p, cp.addr, staticToken("tok"), nil, func(o *Options) {
					if withCache {
						o.Cache = openCache(b, b.TempDir())
					}
					o.Log = nil
					o.Events.Accepted = func(Acceptance) { accepted <- struct{}{} }
				})
				var settle func()
				if settled {
					settle = func() { <-accepted }
				} else {
					go func() {
						for range accepted {
						}
					}()
				}
				envoy := dialEnvoy(b, r, deltaMethod)
				runPingPong(b, envoy.stream, send, len(resp), settle)
			})
		}
	}
}

// BenchmarkObserve1MB is the observer's work for each op of
// BenchmarkRelay1MB, alone: a 1 MB response made contiguous and read, and
// its ACK applied to what Envoy holds. It runs beside the forwarding, on
// the other core.
func BenchmarkObserve1MB(b *testing.B) {
	r, err := New(Options{SocketPath: "/x", Upstream: cpdial.Target{Address: "cp:5678", CAPEM: newPKI(b).caPEM}, Token: staticToken("t")})
	if err != nil {
		b.Fatal(err)
	}
	o := newObserver(r)
	resps := [][]byte{snapshot1MB(b, "1"), snapshot1MB(b, "2")}
	frames := make([]mem.BufferSlice, len(resps))
	for i, resp := range resps { // in grpc's 16 KiB frames
		for len(resp) > 0 {
			n := min(len(resp), 16<<10)
			frames[i] = append(frames[i], mem.SliceBuffer(resp[:n]))
			resp = resp[n:]
		}
	}
	first, err := delta{}.readRequest(mustMarshal(b, &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: listenerType}))
	if err != nil {
		b.Fatal(err)
	}
	ack, err := delta{}.readRequest(mustMarshal(b, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: listenerType, ResponseNonce: "n"}))
	if err != nil {
		b.Fatal(err)
	}
	delta{}.observeRequest(o, first)
	b.SetBytes(int64(len(resps[0])))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		readContiguous(frames[i%2], func(resp []byte) {
			if err := o.response(delta{}, resp, false); err != nil {
				b.Fatal(err)
			}
		})
		delta{}.observeRequest(o, ack)
	}
}
