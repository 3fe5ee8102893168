package xds

import (
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// Resumption is how a relay reached the control plane for the Envoy that
// runs now; nothing secret (the token is read anew for every stream). The
// agent hands it to its next program, which relays for the same Envoy
// when no cached configuration can be served at once.
type Resumption struct {
	Upstream cpdial.Target `json:"upstream"`
}

// resume relays for an Envoy that runs already, started on Bootstrap by an
// earlier program of this agent. Envoy keeps its configuration while its
// stream reconnects; the relay opens the control plane's stream anew.
func resume(o Options) (*Feature, error) {
	admin, err := envoy.AdminFromBootstrap(o.Bootstrap)
	if err != nil {
		o.dropListener()
		return nil, unusable("the running Envoy's", err)
	}
	up, err := o.ControlPlane.dialFor(o.Resume.Upstream)
	if err != nil {
		o.dropListener()
		return nil, err
	}
	return start(o, o.Bootstrap, admin, up)
}
