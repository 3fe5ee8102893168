// Package bootstraprewrite points the Envoy bootstrap that the control
// plane generated at the agent's xDS relay: the ADS gRPC service (and HDS,
// and LDS or CDS should they name a gRPC service of their own) becomes an
// envoy_grpc cluster on a Unix socket, without TLS and without the token.
// Everything else is kept as it came; a token left anywhere else is
// refused. It returns what the relay needs to reach the control plane
// itself (cpdial.Target), and the admin member, so that the document is
// parsed once. It knows nothing of the relay or the cache.
//
// The sections it reads or rewrites are go-control-plane protos
// (bootstrapdoc), refused by name if they hold a field this build does not
// know; the clusters, whose type the binary does not link, are objects
// whose untouched members stay as written.
package bootstraprewrite

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/bootstrapdoc"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// ClusterName is the control plane's name for its ADS cluster; the relay
// cluster keeps it so that Envoy's stats and HDS keep their names.
const ClusterName = "system_ads"

// maxSocketPath is what fits in sockaddr_un.sun_path with its NUL.
const maxSocketPath = 107

// Result is the rewritten bootstrap and the control plane it came for.
type Result struct {
	// JSON is the rewritten bootstrap, which Envoy reads as YAML (JSON is
	// YAML too). No token anywhere in it.
	JSON []byte
	// Admin is the bootstrap's admin member as JSON, nil if it has none:
	// where Envoy's admin API listens, without parsing JSON again.
	Admin    []byte
	Upstream cpdial.Target
}

// Rewrite points doc's ADS (and HDS) at socketPath. Errors say what part of
// the control plane's bootstrap is missing or unexpected.
func Rewrite(doc []byte, socketPath string) (*Result, error) {
	if socketPath == "" || !strings.HasPrefix(socketPath, "/") {
		return nil, fmt.Errorf("relay socket path %q must be absolute", socketPath)
	}
	if len(socketPath) > maxSocketPath {
		return nil, fmt.Errorf("relay socket path %s is %d bytes, longer than a Unix socket allows (%d): use a shorter %s", socketPath, len(socketPath), maxSocketPath, config.KeyWorkDir.Flag())
	}
	root, err := bootstrapdoc.Parse(doc)
	if err != nil {
		return nil, fmt.Errorf("the control plane's bootstrap: %w", err)
	}
	rw := &rewriter{root: root, socket: socketPath}
	if err := rw.rewrite(); err != nil {
		return nil, fmt.Errorf("the control plane's bootstrap: %w", err)
	}
	out := append(root.JSON(), '\n')
	for _, tok := range rw.tokens {
		if len(tok) > 0 && bytes.Contains(out, []byte(tok)) {
			return nil, errors.New("the rewritten bootstrap would still hold the dataplane token; refusing to write it")
		}
	}
	return &Result{JSON: out, Admin: root.Raw("admin"), Upstream: rw.up}, nil
}

type rewriter struct {
	root    *bootstrapdoc.Object
	socket  string
	up      cpdial.Target
	cluster string // the control plane's ADS cluster (envoy_grpc), "" for google_grpc
	target  string // google_grpc target_uri of the control plane
	tokens  []string
}

func (rw *rewriter) rewrite() error {
	dynamic := rw.root.Object("dynamic_resources")
	ads := &corev3.ApiConfigSource{}
	if _, err := dynamic.Decode("ads_config", ads); err != nil {
		return fmt.Errorf("dynamic_resources.%w", err)
	}
	if len(ads.GetGrpcServices()) != 1 {
		return errors.New("no dynamic_resources.ads_config with one gRPC service")
	}
	if err := rw.upstreamFrom(ads.GrpcServices[0]); err != nil {
		return err
	}
	if err := rw.apply(dynamic, ads); err != nil {
		return err
	}
	if rw.cluster != "" {
		return rw.replaceCluster()
	}
	return rw.addCluster()
}

// apply rewrites every gRPC service bound for the control plane: in the
// ADS and HDS config sources, and in LDS's and CDS's should they name one.
func (rw *rewriter) apply(dynamic *bootstrapdoc.Object, ads *corev3.ApiConfigSource) error {
	if rw.service(ads.GrpcServices[0]) {
		if err := dynamic.SetProto("ads_config", ads); err != nil {
			return err
		}
	}
	for _, field := range []string{"lds_config", "cds_config"} {
		if _, err := rw.rewriteSource(dynamic, field, &corev3.ConfigSource{}); err != nil {
			return fmt.Errorf("dynamic_resources.%w", err)
		}
	}
	rw.root.Set("dynamic_resources", dynamic.JSON())
	hds := &corev3.ApiConfigSource{}
	found, err := rw.rewriteSource(rw.root, "hds_config", hds)
	rw.up.HDS = found && rw.usedBy(hds)
	return err
}

// rewriteSource rewrites the config source in parent's field, writing it
// back only if a service in it went to the control plane.
func (rw *rewriter) rewriteSource(parent *bootstrapdoc.Object, field string, src proto.Message) (bool, error) {
	found, err := parent.Decode(field, src)
	if !found || err != nil {
		return found, err
	}
	changed := false
	for _, s := range grpcServicesOf(src) {
		changed = rw.service(s) || changed
	}
	if !changed {
		return true, nil
	}
	return true, parent.SetProto(field, src)
}

func grpcServicesOf(src proto.Message) []*corev3.GrpcService {
	switch s := src.(type) {
	case *corev3.ApiConfigSource:
		return s.GetGrpcServices()
	case *corev3.ConfigSource:
		return s.GetApiConfigSource().GetGrpcServices()
	}
	return nil
}
