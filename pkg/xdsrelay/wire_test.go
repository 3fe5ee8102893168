package xdsrelay

import (
	"fmt"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestScanResponsesReadsWhatProtobufReads(t *testing.T) {
	l := listener(t, "zone-ingress", 3)
	wrapped, err := anypb.New(&discoveryv3.Resource{Name: "wrapped", Version: "9", Resource: listener(t, "wrapped", 0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		scan func([]byte) (*pendingResponse, string, error)
		msg  []byte
		want string
	}{
		{"delta", scanDeltaResponse, mustMarshal(t, &discoveryv3.DeltaDiscoveryResponse{
			SystemVersionInfo: "v3", TypeUrl: listenerType, Nonce: "n3",
			Resources: []*discoveryv3.Resource{
				{Name: "zone-ingress", Version: "3", Resource: l},
				{ResourceName: &discoveryv3.ResourceName{Name: "by-resource-name"}, Version: "4", Resource: l},
				{Name: "name-only", Version: "5"},
			},
			RemovedResources:     []string{"old"},
			RemovedResourceNames: []*discoveryv3.ResourceName{{Name: "older"}},
		}), "v3 Listener n3 [zone-ingress@3 by-resource-name@4] removed [old older] replace=false"},
		{"state of the world", scanSotwResponse, mustMarshal(t, &discoveryv3.DiscoveryResponse{
			VersionInfo: "v4", TypeUrl: listenerType, Nonce: "n4", Resources: []*anypb.Any{l, wrapped},
		}), "v4 Listener n4 [zone-ingress@ wrapped@9] removed [] replace=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, nonce, err := tc.scan(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			var res []string
			for _, r := range p.resources {
				if r.TypeURL != listenerType || len(r.Body) == 0 {
					t.Errorf("%s: type %q, %d bytes", r.Name, r.TypeURL, len(r.Body))
				}
				res = append(res, r.Name+"@"+r.Version)
			}
			got := fmt.Sprintf("%s %s %s %v removed %v replace=%t", p.version, shortType(p.typeURL), nonce, res, p.removed, p.replace)
			if got != tc.want {
				t.Fatalf("scanned %s\nwant    %s", got, tc.want)
			}
			if _, _, err := tc.scan(tc.msg[:len(tc.msg)-3]); err == nil {
				t.Error("a truncated response scanned without error")
			}
		})
	}
}

func FuzzScanResponses(f *testing.F) {
	f.Add(mustMarshal(f, deltaResponse(f, listenerType, "1", "n", "a", "b")))
	f.Add(mustMarshal(f, &discoveryv3.DiscoveryResponse{TypeUrl: listenerType, Resources: []*anypb.Any{listener(f, "x", 2)}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = scanDeltaResponse(b)
		_, _, _ = scanSotwResponse(b)
	})
}
