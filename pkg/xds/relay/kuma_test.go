package relay

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/xds/bootstraprewrite"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

// kumaSetup is the test control plane's bootstrap for one zone proxy,
// rewritten for the relay.
type kumaSetup struct {
	cp       *controlplane.Server
	cfg      *config.Config
	token    string
	rewrite  *bootstraprewrite.Result
	node     *corev3.Node
	socket   string
	original []byte
}

func kumaBootstrap(t *testing.T) kumaSetup {
	t.Helper()
	return kumaBootstrapAt(t, "192.0.2.10", 10001)
}

// kumaBootstrapAt is for a zone ingress on address:port.
func kumaBootstrapAt(t *testing.T, address string, port int) kumaSetup {
	t.Helper()
	cp, err := controlplane.Start(controlplane.Options{Dir: t.TempDir(), Meshes: []string{"default"}, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Close() })
	cfg := &config.Config{Mesh: "default", Role: config.RoleIngress, Address: address, IngressPort: port, AdminPort: 9901}
	cfg.Complete(config.Host{Hostname: "vm1"})
	token, err := cp.IssueToken(controlplane.TokenRequest{Mesh: "default", Name: cfg.Name})
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(cp.CACertFile())
	client, err := bootstrap.NewClient(cp.URL(), caPEM)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	dir, err := os.MkdirTemp("", "xk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	doc, err := client.Fetch(ctx, &bootstrap.Request{Mesh: cfg.Mesh, Name: cfg.Name, ProxyType: "dataplane",
		DataplaneToken: token, DataplaneResource: cfg.Dataplane().JSON(), Workdir: dir, ReadinessPort: 9902,
		Version: bootstrap.Version{Envoy: bootstrap.EnvoyVersion{Version: "1.39.0", KumaDpCompatible: true}}})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "xds.sock")
	res, err := bootstraprewrite.Rewrite(doc, sock)
	if err != nil {
		t.Fatal(err)
	}
	return kumaSetup{cp: cp, cfg: cfg, token: token, rewrite: res, node: bootstrapNode(t, res.JSON), socket: sock, original: doc}
}

// bootstrapNode is the node Envoy announces, read from its bootstrap.
func bootstrapNode(t *testing.T, doc []byte) *corev3.Node {
	t.Helper()
	var b struct {
		Node any `json:"node"`
	}
	if err := yaml.Unmarshal(doc, &b); err != nil {
		t.Fatal(err)
	}
	js, _ := yaml.Marshal(b.Node)
	js, _ = yaml.YAMLToJSON(js)
	n := &corev3.Node{}
	if err := protojson.Unmarshal(js, n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (k kumaSetup) relay(t *testing.T, token string, ev *events, mods ...relayOpts) *Relay {
	t.Helper()
	return startRelay(t, nil, "", staticToken(token), ev, append([]relayOpts{func(o *Options) {
		o.SocketPath = k.socket
		o.Upstream = k.rewrite.Upstream
	}}, mods...)...)
}

// Against the test control plane, which authenticates like kuma-cp: the
// rewritten bootstrap and the relay get Envoy its configuration.
func TestKumaShapedControlPlaneThroughTheRelay(t *testing.T) {
	k := kumaBootstrap(t)
	if strings.Contains(string(k.rewrite.JSON), k.token) {
		t.Fatal("token in the rewritten bootstrap")
	}
	ev := newEvents()
	r := k.relay(t, k.token, ev)
	envoy := dialEnvoy(t, r, deltaMethod)
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: k.node, TypeUrl: clusterType})
	resp := envoy.recvDelta()
	if len(resp.GetResources()) == 0 {
		t.Fatalf("no clusters: %v", resp)
	}
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: clusterType, ResponseNonce: resp.GetNonce()})
	ev.await(t, "the CDS ACK", func(e *events) bool { return len(e.accepts) == 1 })
	k.awaitProxy(t, "connected with its clusters ACKed", func(p controlplane.ProxyInfo) bool {
		return p.Connected && slices.Contains(p.ACKed, clusterType)
	})
}

// awaitProxy waits until the control plane's view of the one proxy holds.
func (k kumaSetup) awaitProxy(t *testing.T, what string, cond func(controlplane.ProxyInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		ps := k.cp.Proxies()
		if len(ps) == 1 && cond(ps[0]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the control plane never saw the proxy %s: %+v", what, ps)
		}
		time.Sleep(20 * time.Millisecond) // the test CP offers no change notification
	}
}

// A token the control plane refuses: its words reach the agent and Envoy.
func TestKumaShapedRefusalReachesTheAgent(t *testing.T) {
	k := kumaBootstrap(t)
	other, err := k.cp.IssueToken(controlplane.TokenRequest{Mesh: "default", Name: "someone-else"})
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvents()
	r := k.relay(t, other, ev)
	envoy := dialEnvoy(t, r, deltaMethod)
	envoy.send(&discoveryv3.DeltaDiscoveryRequest{Node: k.node, TypeUrl: clusterType})
	_, err = envoy.recv()
	if st := grpcstatus.Convert(err); st.Code() == codes.OK || !strings.Contains(st.Message(), "authentication failed") {
		t.Fatalf("Envoy got %v", err)
	}
	ev.await(t, "the refusal", func(e *events) bool { return len(e.errs) == 1 })
	if se := ev.errs[0]; !strings.Contains(se.Message, "authentication failed") || se.Unreachable || se.Retrying {
		t.Fatalf("reported %+v", se)
	}
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
