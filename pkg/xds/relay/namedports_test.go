package relay

import (
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"go.uber.org/zap"
	zapobserver "go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/proto"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

func listenerMatching(t *testing.T, name string, snis ...string) lkgcache.Resource {
	t.Helper()
	l := &listenerv3.Listener{Name: name}
	for _, sni := range snis {
		l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{sni}}})
	}
	b, err := proto.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return lkgcache.Resource{Name: name, TypeURL: listenerTypeURL, Body: b}
}

// Which SNIs of an ingress's listeners carry a MeshService port name.
func TestNamedPortSNIs(t *testing.T) {
	for _, tc := range []struct {
		name string
		snis []string
		want []string
	}{
		{"numbered port", []string{"sni.msvc.payments.default.backend.80"}, nil},
		{"named port", []string{"sni.msvc.payments.default.backend.http"}, []string{"sni.msvc.payments.default.backend.http"}},
		{"global-originated, named", []string{"sni.msvc.payments.backend.grpc-api"}, []string{"sni.msvc.payments.backend.grpc-api"}},
		{"an external service's name is not a MeshService port", []string{"sni.extsvc.payments.default.httpbin.http"}, nil},
		{"legacy hash SNI", []string{"ae10a8071b8a8eeb8.backend.8080.demo.ms"}, nil},
		{"mixed, sorted, once each", []string{"sni.msvc.p.default.b.web", "sni.msvc.p.default.a.80", "sni.msvc.p.default.a.http", "sni.msvc.p.default.b.web"},
			[]string{"sni.msvc.p.default.a.http", "sni.msvc.p.default.b.web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := namedPortSNIs([]lkgcache.Resource{listenerMatching(t, "self_zoneingress_dp_zi", tc.snis...), {Name: "garbage", Body: []byte{0xff}}})
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// A warning once per change of the named set, not on every push; only for a
// state-of-the-world LDS response from the control plane.
func TestNamedPortsWarnOncePerChange(t *testing.T) {
	core, logs := zapobserver.New(zap.InfoLevel)
	r := &Relay{log: zap.New(core)}
	named := listenerMatching(t, "zi", "sni.msvc.payments.default.backend.http")
	numbered := listenerMatching(t, "zi", "sni.msvc.payments.default.backend.80")
	other := listenerMatching(t, "zi", "sni.msvc.payments.default.backend.http", "sni.msvc.payments.default.web.web")
	lds := func(replace, fromCache bool, l lkgcache.Resource) *pendingResponse {
		return &pendingResponse{typeURL: listenerTypeURL, replace: replace, fromCache: fromCache, resources: []lkgcache.Resource{l}}
	}
	for _, step := range []struct {
		name string
		p    *pendingResponse
		want int // warnings so far
	}{
		{"delta (kuma-cp 3.0)", lds(false, false, named), 0},
		{"from the cache", lds(true, true, named), 0},
		{"SotW with a named port", lds(true, false, named), 1},
		{"the same again", lds(true, false, named), 1},
		{"numbered now", lds(true, false, numbered), 1},
		{"the same names again", lds(true, false, named), 1},
		{"other names", lds(true, false, other), 2},
	} {
		r.warnNamedPorts(step.p)
		if got := logs.FilterMessageSnippet("MeshService port names").Len(); got != step.want {
			t.Fatalf("%s: %d warnings, want %d", step.name, got, step.want)
		}
	}
}
