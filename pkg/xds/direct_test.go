package xds

import (
	"bytes"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/bootstrapdoc"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
)

// In direct mode Envoy's node is what kuma-cp judges: it must carry a
// version of the control plane's own release line, which the bootstrap's
// ADS kind tells (kuma-cp 2.14 hands out state of the world).
func TestDirectModeReportsTheControlPlanesReleaseLine(t *testing.T) {
	sotw := bytes.Replace(cpBootstrap(nil), []byte("apiType: DELTA_GRPC"), []byte("apiType: GRPC"), 1)
	tests := []struct {
		name    string
		relay   bool
		doc     []byte
		version string // version.kumaDp.version in Envoy's node; "" = the doc as it came
	}{
		{name: "kuma-cp 3.0: delta ADS", doc: cpBootstrap(nil), version: "3.0.0"},
		{name: "kuma-cp 2.14: state of the world", doc: sotw, version: "2.14.3"},
		{name: "no ADS section: state of the world", doc: []byte(noADS), version: "2.14.3"},
		{name: "the relay's fallback to direct mode", relay: true, doc: []byte(noADS), version: "2.14.3"},
		{name: "no node: left as it came", doc: []byte("admin: {address: {pipe: {path: /run/zp/a.sock}}}\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Start(Options{Relay: tt.relay, Bootstrap: tt.doc, AgentMetadata: bootstrap.SetAgentBuild})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if tt.version == "" {
				if !bytes.Equal(f.Bootstrap(), tt.doc) {
					t.Fatalf("the bootstrap changed:\n%s", f.Bootstrap())
				}
				return
			}
			o, err := bootstrapdoc.Parse(f.Bootstrap())
			if err != nil {
				t.Fatal(err)
			}
			node := &corev3.Node{}
			if _, err := o.Decode("node", node); err != nil {
				t.Fatal(err)
			}
			got := node.GetMetadata().GetFields()["version"].GetStructValue().GetFields()["kumaDp"].GetStructValue().GetFields()["version"].GetStringValue()
			if got != tt.version {
				t.Errorf("Envoy's node reports kumaDp %q, want %q", got, tt.version)
			}
			if node.GetId() != "default.zp" {
				t.Errorf("node id %q: the rewrite lost the node", node.GetId())
			}
			if want, _ := envoy.AdminFromBootstrap(tt.doc); f.Admin() != want {
				t.Errorf("admin %+v, want %+v as the control plane's bootstrap says", f.Admin(), want)
			}
			if strings.Contains(string(f.Bootstrap()), "zoneproxy-xds.sock") {
				t.Errorf("direct mode points Envoy at a relay")
			}
		})
	}
}
