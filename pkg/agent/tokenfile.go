package agent

import (
	"bytes"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/token"
)

// fileCredential is what a bootstrap names when Envoy is to read the token
// file itself (the control plane's reloadable tokens, without the relay).
var fileCredential = []byte("envoy.grpc_credentials.file_based_metadata")

// warnIfEnvoyReadsUntrimmedToken warns when Envoy will send the token file
// as it is and the file carries whitespace (`echo $TOKEN > file`): a
// newline in a gRPC header fails every stream. The agent trims what it
// sends itself, so only direct mode with reloadable tokens is exposed.
func (a *Agent) warnIfEnvoyReadsUntrimmedToken(doc []byte) {
	path := a.cfg.DataplaneTokenFile
	if a.xds.get() != nil || path == "" || !bytes.Contains(doc, fileCredential) {
		return
	}
	raw, err := token.ReadRaw(path) // bounded, and never blocks on a pipe
	if err != nil || len(bytes.TrimSpace(raw)) == len(raw) {
		return
	}
	a.log.Warn("Envoy reads the dataplane token file itself (the control plane has reloadable tokens on and "+config.KeyXDSRelay.Flag()+"=false), and the file has a leading or trailing newline or space, which Envoy sends as it is and every stream fails on: write the token without it (printf '%s' \"$TOKEN\" > file) or use the xDS relay ("+config.KeyXDSRelay.Flag()+"=true, the default), which trims it",
		zap.String("file", path))
}
