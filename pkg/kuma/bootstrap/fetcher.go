package bootstrap

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/token"
	"github.com/zoneproxy/zoneproxy/pkg/version"
)

// systemCAPaths are checked in order, as kuma-dp does; the control plane
// hands the first existing one to Envoy for external TLS.
var systemCAPaths = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// Fetcher makes /bootstrap attempts for one configuration. `run` retries
// it; `check` and `bootstrap` make a single attempt.
type Fetcher struct {
	client    *Client
	req       Request
	tokenPath string
	inline    string
	sent      string // the token the last request carried
}

// NewFetcher prepares the request. tokenPath overrides the configured token
// file (run writes an inline token into its work dir so the control plane
// gets a path too).
func NewFetcher(cfg *config.Config, workDir, tokenPath string, ev envoy.Version) (*Fetcher, error) {
	client, err := NewClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return client.Fetcher(cfg, workDir, tokenPath, ev), nil
}

// NewClientFor reads cfg's CA file once (a regular file of a bounded size,
// as validation does), for every request.
func NewClientFor(cfg *config.Config) (*Client, error) {
	var caPEM []byte
	if cfg.CACertFile != "" {
		f, err := config.ReadCAFile(cfg.CACertFile)
		if err != nil {
			return nil, exitcode.AsConfig(fmt.Errorf("%s: cannot read %s: %v", config.KeyCACertFile.Flag(), cfg.CACertFile, errtext.PathCause(err)))
		}
		caPEM = f.PEM
	}
	client, err := NewClient(cfg.CPAddress, caPEM)
	if err != nil {
		return nil, exitcode.AsConfig(fmt.Errorf("%s %s: %w", config.KeyCACertFile.Flag(), cfg.CACertFile, err))
	}
	if cfg.CACertFile != "" {
		client.trust = trust{caFile: cfg.CACertFile, certs: config.ParseCAFile(caPEM).Certs}
	}
	return client, nil
}

// Fetcher prepares the request on c; the fetcher's Close drops c's
// connections, and c may be closed again by whoever made it.
func (c *Client) Fetcher(cfg *config.Config, workDir, tokenPath string, ev envoy.Version) *Fetcher {
	if tokenPath == "" {
		tokenPath = cfg.DataplaneTokenFile
	}
	return &Fetcher{
		client: c, req: *newRequest(cfg, workDir, ev, c.caPEM),
		tokenPath: tokenPath, inline: strings.TrimSpace(cfg.DataplaneToken),
	}
}

// Attempt sends one request.
func (f *Fetcher) Attempt(ctx context.Context) ([]byte, error) {
	r := f.req
	r.DataplaneToken = f.inline
	if f.tokenPath != "" {
		tok, err := f.readToken()
		if err != nil {
			return nil, err
		}
		r.DataplaneToken = tok
		r.DataplaneTokenPath = f.tokenPath
	}
	f.sent = r.DataplaneToken
	return f.client.Fetch(ctx, &r)
}

// readToken reads the token file each time, so a rotated token is picked
// up. Validation found it usable at start-up: missing, empty or no
// regular file now, it is being replaced (not atomically), so the attempt
// is retried. The error is Local: no request was made, and the control
// plane is not to be taken for unreachable because of it.
func (f *Fetcher) readToken() (string, error) {
	tok, err := token.ReadFile(f.tokenPath)
	path := errtext.Value(f.tokenPath)
	switch {
	case errors.Is(err, token.ErrEmpty):
		return "", &Error{Kind: Local,
			Msg: fmt.Sprintf("%s: %s is empty (is it being rotated?); retrying once it holds the token", config.KeyDataplaneTokenFile.Flag(), path)}
	case err != nil:
		return "", &Error{Kind: Local, Err: errtext.PathCause(err),
			Msg: fmt.Sprintf("%s: cannot read %s (is it being rotated?); retrying", config.KeyDataplaneTokenFile.Flag(), path)}
	}
	return tok, nil
}

// Token is the credential the last request carried (and so the one in
// Envoy's bootstrap), for redaction.
func (f *Fetcher) Token() string { return f.sent }

// Close drops the client's connections.
func (f *Fetcher) Close() { f.client.Close() }

// agentBuild is how the agent describes this build to a control plane of
// release r: r's Kuma version, not zoneproxy's own, which kuma-cp would
// judge incompatible with itself.
func agentBuild(r version.KumaRelease) KumaDpVersion {
	return KumaDpVersion{
		Version: r.Kuma, GitTag: "zoneproxy-" + version.Version,
		GitCommit: version.Commit, BuildDate: version.BuildDate,
	}
}

// SetAgentBuild puts this build into an xDS node's metadata where kuma-cp's
// bootstrap puts what the request said of it (AgentBuildFields), so that
// kuma-cp sees the running agent after a reload to a new one, and a
// version of its own release line: the bootstrap request, sent before the
// control plane's release is known, names the newest, and a 2.14 control
// plane (the one that serves state-of-the-world ADS) would flag that.
func SetAgentBuild(md *structpb.Struct, deltaADS bool) {
	// As kuma-cp makes it of the request: the JSON of KumaDpVersion.
	b := agentBuild(version.ForADS(deltaADS))
	kumaDp := map[string]any{}
	if raw, err := json.Marshal(b); err == nil {
		_ = json.Unmarshal(raw, &kumaDp)
	}
	if v, err := structpb.NewValue(kumaDp); err == nil {
		member(md, "version").Fields["kumaDp"] = v
	}
	member(md, "dynamicMetadata").Fields[dependencyVersionKey] = structpb.NewStringValue(version.Version)
}

// member is md's struct member name, made if missing.
func member(md *structpb.Struct, name string) *structpb.Struct {
	if md.Fields == nil {
		md.Fields = map[string]*structpb.Value{}
	}
	s := md.Fields[name].GetStructValue()
	if s == nil {
		s = &structpb.Struct{}
		md.Fields[name] = structpb.NewStructValue(s)
	}
	if s.Fields == nil {
		s.Fields = map[string]*structpb.Value{}
	}
	return s
}

// dependencyVersionKey is the DynamicMetadata key that carries the
// agent's version.
const dependencyVersionKey = "version.dependencies.zoneproxy"

// AgentBuildFields are where kuma-cp's bootstrap carries what the request
// says of the agent's own build (node metadata: version.kumaDp, and the
// dynamic metadata key): they change with every agent upgrade, and Envoy
// does not read them.
var AgentBuildFields = [][]string{
	{"node", "metadata", "version", "kumaDp"},
	{"node", "metadata", "dynamicMetadata", dependencyVersionKey},
}

func newRequest(cfg *config.Config, workDir string, ev envoy.Version, caPEM []byte) *Request {
	dp := cfg.Dataplane()
	return &Request{
		Mesh:              dp.Mesh,
		Name:              dp.Name,
		ProxyType:         "dataplane",
		DataplaneResource: dp.JSON(),
		Version: Version{
			KumaDp: agentBuild(version.Newest()),
			Envoy:  EnvoyVersion{Version: ev.Version, Build: ev.Build, KumaDpCompatible: version.EnvoyCompatible(ev.Version)},
		},
		CACert: certificatesOnly(caPEM),
		// Shown in the DataplaneInsight's version dependencies.
		DynamicMetadata: map[string]string{dependencyVersionKey: version.Version},
		ReadinessPort:   uint32(cfg.ReadinessPort),
		OperatingSystem: runtime.GOOS,
		Features:        []string{FeatureTCPAccessLogViaNamedPipe, FeatureReusePort},
		Workdir:         workDir,
		SystemCAPath:    firstExisting(systemCAPaths),
		IPv6Enabled:     hostHasIPv6(),
	}
}

// certificatesOnly is pemData's CERTIFICATE blocks, re-encoded. kuma-cp
// reads only the first block of caCert (a key first gets a bare 500 for
// ever), and nothing else in a combined file, a private key above all,
// belongs on the wire.
func certificatesOnly(pemData []byte) string {
	var out []byte
	for {
		var b *pem.Block
		b, pemData = pem.Decode(pemData)
		if b == nil {
			return string(out)
		}
		if b.Type == "CERTIFICATE" {
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: b.Bytes})...)
		}
	}
}

func firstExisting(paths []string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func hostHasIPv6() bool {
	b, err := os.ReadFile("/proc/net/if_inet6")
	return err == nil && len(b) > 0
}
