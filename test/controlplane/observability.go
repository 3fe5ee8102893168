package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// MeshAccessLog is the `default` of one MeshAccessLog rule that targets a
// zone proxy, in kuma's JSON shape (Tcp and File backends).
type MeshAccessLog struct {
	Backends []AccessLogBackend `json:"backends"`
}

// AccessLogBackend is one backend: Type "Tcp" with TCP, or "File" with File.
type AccessLogBackend struct {
	Type string               `json:"type"`
	TCP  *TCPAccessLogBackend `json:"tcp,omitempty"`
	File *FileAccessLogBack   `json:"file,omitempty"`
}

// TCPAccessLogBackend ships lines to address through kuma-dp's FIFO.
type TCPAccessLogBackend struct {
	Address string           `json:"address"`
	Format  *AccessLogFormat `json:"format,omitempty"`
}

// FileAccessLogBack is written by Envoy itself.
type FileAccessLogBack struct {
	Path   string           `json:"path"`
	Format *AccessLogFormat `json:"format,omitempty"`
}

// AccessLogFormat is Type "Plain" with Plain, or "Json" with JSON.
type AccessLogFormat struct {
	Type            string          `json:"type"`
	Plain           string          `json:"plain,omitempty"`
	JSON            []AccessLogJSON `json:"json,omitempty"`
	OmitEmptyValues bool            `json:"omitEmptyValues,omitempty"`
}

// AccessLogJSON is one key of a Json format.
type AccessLogJSON struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// MeshMetric is the `default` of a MeshMetric that targets a zone proxy,
// in kuma's JSON shape. `applications` is not accepted: kuma-cp drops it
// for zone proxies.
type MeshMetric struct {
	Sidecar  *MetricsSidecar  `json:"sidecar,omitempty"`
	Backends []MetricsBackend `json:"backends"`
}

// MetricsSidecar is kuma's Sidecar; it is copied into /meshmetric as is.
type MetricsSidecar struct {
	Profiles      *MetricsProfiles `json:"profiles,omitempty"`
	IncludeUnused *bool            `json:"includeUnused,omitempty"`
}

// MetricsProfiles selects the published metric families.
type MetricsProfiles struct {
	AppendProfiles *[]MetricsProfile  `json:"appendProfiles,omitempty"`
	Exclude        *[]MetricsSelector `json:"exclude,omitempty"`
	Include        *[]MetricsSelector `json:"include,omitempty"`
}

// MetricsProfile is All, Basic or None.
type MetricsProfile struct {
	Name string `json:"name"`
}

// MetricsSelector is Prefix, Regex, Exact or Contains.
type MetricsSelector struct {
	Type  string `json:"type"`
	Match string `json:"match"`
}

// MetricsBackend is Type "Prometheus" or "OpenTelemetry".
type MetricsBackend struct {
	Type          string                `json:"type"`
	Prometheus    *PrometheusBackend    `json:"prometheus,omitempty"`
	OpenTelemetry *OpenTelemetryBackend `json:"openTelemetry,omitempty"`
}

// PrometheusBackend defaults: clientId "default-backend", port 5670,
// path "/metrics".
type PrometheusBackend struct {
	ClientID string `json:"clientId,omitempty"`
	Port     uint32 `json:"port,omitempty"`
	Path     string `json:"path,omitempty"`
}

// OpenTelemetryBackend stands for a backendRef to a MeshOpenTelemetryBackend
// (the test CP has no MOTB store, so the backend is given inline): Name is
// the MOTB name, Endpoint its address and port (default 4317).
type OpenTelemetryBackend struct {
	Name            string       `json:"name"`
	Endpoint        OTelEndpoint `json:"endpoint"`
	RefreshInterval string       `json:"refreshInterval,omitempty"`
}

// OTelEndpoint is a MOTB endpoint.
type OTelEndpoint struct {
	Address string `json:"address"`
	Port    uint32 `json:"port,omitempty"`
}

// ProxyPolicies is what is attached to one zone proxy (mesh/name), plus
// whether its zone listeners are withheld.
type ProxyPolicies struct {
	MeshAccessLogs        map[string]MeshAccessLog `json:"meshAccessLogs"`
	MeshMetrics           map[string]MeshMetric    `json:"meshMetrics"`
	WithholdZoneListeners bool                     `json:"withholdZoneListeners"`
}

func (p ProxyPolicies) clone() ProxyPolicies {
	out := ProxyPolicies{MeshAccessLogs: map[string]MeshAccessLog{}, MeshMetrics: map[string]MeshMetric{}, WithholdZoneListeners: p.WithholdZoneListeners}
	for k, v := range p.MeshAccessLogs {
		out.MeshAccessLogs[k] = v
	}
	for k, v := range p.MeshMetrics {
		out.MeshMetrics[k] = v
	}
	return out
}

// observabilityState is the policies per node id ("mesh.name") and what
// is needed to rebuild a connected proxy's snapshot.
type observabilityState struct {
	mu       sync.Mutex
	policies map[string]ProxyPolicies
	build    sync.Mutex            // one snapshot build at a time, so pushes stay ordered
	inputs   map[string]buildInput // per node id, once it connected
}

const (
	defaultPrometheusClientID = "default-backend"
	defaultPrometheusPort     = 5670
	defaultPrometheusPath     = "/metrics"
	defaultOTelPort           = 4317
	defaultRefreshInterval    = time.Minute
)

var policyNameRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$`)

func checkPolicyName(kind, name string) error {
	if !policyNameRe.MatchString(name) {
		return fmt.Errorf("%s name %q: must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.')", kind, name)
	}
	return nil
}

func checkProxyRef(mesh, name string) error {
	switch {
	case mesh == "" || name == "":
		return errors.New("mesh and name of the zone proxy are required")
	case strings.Contains(mesh, "."):
		return fmt.Errorf("mesh %q: must not contain '.' (the node id is <mesh>.<name>)", mesh)
	}
	return nil
}

// validate checks a MeshAccessLog the way kuma's validator does for the
// supported backends; errors name the field.
func (m MeshAccessLog) validate() error {
	if len(m.Backends) == 0 {
		return errors.New("backends: must have at least one element")
	}
	for i, b := range m.Backends {
		path := fmt.Sprintf("backends[%d]", i)
		switch b.Type {
		case "Tcp":
			if b.TCP == nil || b.File != nil {
				return fmt.Errorf("%s: type Tcp needs tcp (and no file)", path)
			}
			if _, port, err := net.SplitHostPort(b.TCP.Address); err != nil || b.TCP.Address == "" || port == "" {
				return fmt.Errorf("%s.tcp.address: %q must be host:port", path, b.TCP.Address)
			}
			if err := b.TCP.Format.validate(path + ".tcp.format"); err != nil {
				return err
			}
		case "File":
			if b.File == nil || b.TCP != nil {
				return fmt.Errorf("%s: type File needs file (and no tcp)", path)
			}
			if !strings.HasPrefix(b.File.Path, "/") {
				return fmt.Errorf("%s.file.path: %q must be an absolute path", path, b.File.Path)
			}
			if err := b.File.Format.validate(path + ".file.format"); err != nil {
				return err
			}
		case "OpenTelemetry":
			return fmt.Errorf("%s.type: OpenTelemetry access logs are not modelled by the test control plane; use Tcp or File", path)
		default:
			return fmt.Errorf("%s.type: %q must be Tcp or File", path, b.Type)
		}
	}
	return nil
}

func (f *AccessLogFormat) validate(path string) error {
	if f == nil {
		return nil
	}
	switch f.Type {
	case "Plain":
		if f.Plain == "" || len(f.JSON) > 0 {
			return fmt.Errorf("%s: type Plain needs a non-empty plain (and no json)", path)
		}
	case "Json":
		if len(f.JSON) == 0 || f.Plain != "" {
			return fmt.Errorf("%s: type Json needs json entries (and no plain)", path)
		}
		for i, kv := range f.JSON {
			if kv.Key == "" || kv.Value == "" {
				return fmt.Errorf("%s.json[%d]: key and value are required", path, i)
			}
		}
	default:
		return fmt.Errorf("%s.type: %q must be Plain or Json", path, f.Type)
	}
	return nil
}

var (
	selectorTypes = map[string]bool{"Prefix": true, "Regex": true, "Exact": true, "Contains": true}
	profileNames  = map[string]bool{"All": true, "Basic": true, "None": true}
	otelNameRe    = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
)

// withDefaults fills kuma's defaults in and validates; errors name the field.
func (m MeshMetric) withDefaults() (MeshMetric, error) {
	out := MeshMetric{Sidecar: m.Sidecar}
	if s := m.Sidecar; s != nil && s.Profiles != nil {
		for _, sel := range []struct {
			name string
			list *[]MetricsSelector
		}{{"exclude", s.Profiles.Exclude}, {"include", s.Profiles.Include}} {
			if sel.list == nil {
				continue
			}
			for i, x := range *sel.list {
				p := fmt.Sprintf("sidecar.profiles.%s[%d]", sel.name, i)
				if !selectorTypes[x.Type] {
					return out, fmt.Errorf("%s.type: %q must be Prefix, Regex, Exact or Contains", p, x.Type)
				}
				if x.Match == "" {
					return out, fmt.Errorf("%s.match: must not be empty", p)
				}
				if x.Type == "Regex" {
					if _, err := regexp.Compile(x.Match); err != nil {
						return out, fmt.Errorf("%s.match: invalid regex: %v", p, err)
					}
				}
			}
		}
		if s.Profiles.AppendProfiles != nil {
			for i, p := range *s.Profiles.AppendProfiles {
				if !profileNames[p.Name] {
					return out, fmt.Errorf("sidecar.profiles.appendProfiles[%d].name: %q must be All, Basic or None", i, p.Name)
				}
			}
		}
	}
	if len(m.Backends) == 0 {
		return out, errors.New("backends: must have at least one element")
	}
	clientIDs := map[string]bool{}
	for i, b := range m.Backends {
		path := fmt.Sprintf("backends[%d]", i)
		switch b.Type {
		case "Prometheus":
			if b.Prometheus == nil || b.OpenTelemetry != nil {
				return out, fmt.Errorf("%s: type Prometheus needs prometheus (and no openTelemetry)", path)
			}
			p := *b.Prometheus
			if p.ClientID == "" {
				p.ClientID = defaultPrometheusClientID
			}
			if p.Port == 0 {
				p.Port = defaultPrometheusPort
			}
			if p.Path == "" {
				p.Path = defaultPrometheusPath
			}
			switch {
			case p.Port > 65535:
				return out, fmt.Errorf("%s.prometheus.port: %d is not a port", path, p.Port)
			case !strings.HasPrefix(p.Path, "/"):
				return out, fmt.Errorf("%s.prometheus.path: %q must start with /", path, p.Path)
			case clientIDs[p.ClientID]:
				return out, fmt.Errorf("%s.prometheus.clientId: %q is used twice", path, p.ClientID)
			}
			clientIDs[p.ClientID] = true
			out.Backends = append(out.Backends, MetricsBackend{Type: b.Type, Prometheus: &p})
		case "OpenTelemetry":
			if b.OpenTelemetry == nil || b.Prometheus != nil {
				return out, fmt.Errorf("%s: type OpenTelemetry needs openTelemetry (and no prometheus)", path)
			}
			o := *b.OpenTelemetry
			if !otelNameRe.MatchString(o.Name) {
				return out, fmt.Errorf("%s.openTelemetry.name: %q must be a MeshOpenTelemetryBackend name (lowercase letters, digits, '-')", path, o.Name)
			}
			if o.Endpoint.Address == "" {
				return out, fmt.Errorf("%s.openTelemetry.endpoint.address: required", path)
			}
			if o.Endpoint.Port == 0 {
				o.Endpoint.Port = defaultOTelPort
			}
			if o.Endpoint.Port > 65535 {
				return out, fmt.Errorf("%s.openTelemetry.endpoint.port: %d is not a port", path, o.Endpoint.Port)
			}
			if o.RefreshInterval != "" {
				d, err := time.ParseDuration(o.RefreshInterval)
				if err != nil || d <= 0 {
					return out, fmt.Errorf("%s.openTelemetry.refreshInterval: %q must be a positive duration like 10s", path, o.RefreshInterval)
				}
			}
			out.Backends = append(out.Backends, MetricsBackend{Type: b.Type, OpenTelemetry: &o})
		default:
			return out, fmt.Errorf("%s.type: %q must be Prometheus or OpenTelemetry", path, b.Type)
		}
	}
	return out, nil
}

func (s *Server) obsState() *observabilityState {
	s.obs.mu.Lock()
	defer s.obs.mu.Unlock()
	if s.obs.policies == nil {
		s.obs.policies = map[string]ProxyPolicies{}
	}
	return &s.obs
}

func (s *Server) updatePolicies(mesh, name string, change func(*ProxyPolicies)) {
	st := s.obsState()
	st.mu.Lock()
	key := mesh + "." + name
	p := st.policies[key].clone()
	change(&p)
	st.policies[key] = p
	st.mu.Unlock()
	s.pushSnapshot(key)
}

// PoliciesFor returns what is attached to the zone proxy mesh/name.
func (s *Server) PoliciesFor(mesh, name string) ProxyPolicies {
	st := s.obsState()
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.policies[mesh+"."+name].clone()
}

// SetMeshAccessLog attaches (or replaces) the MeshAccessLog policy to the
// zone proxy mesh/name and pushes the change to it if it is connected.
func (s *Server) SetMeshAccessLog(mesh, name, policy string, m MeshAccessLog) error {
	return s.setPolicy(mesh, name, "MeshAccessLog", policy, m.validate, func(p *ProxyPolicies) { p.MeshAccessLogs[policy] = m })
}

// DeleteMeshAccessLog detaches a MeshAccessLog; false if it was not there.
func (s *Server) DeleteMeshAccessLog(mesh, name, policy string) bool {
	return deletePolicy(s, mesh, name, "MeshAccessLog", policy, func(p *ProxyPolicies) map[string]MeshAccessLog { return p.MeshAccessLogs })
}

// SetMeshMetric attaches (or replaces) a MeshMetric policy. With several,
// they are merged in name order, a later one's sidecar and backends
// replacing an earlier one's, like kuma's merge of list fields.
func (s *Server) SetMeshMetric(mesh, name, policy string, m MeshMetric) error {
	var withDefaults MeshMetric
	check := func() (err error) { withDefaults, err = m.withDefaults(); return err }
	return s.setPolicy(mesh, name, "MeshMetric", policy, check, func(p *ProxyPolicies) { p.MeshMetrics[policy] = withDefaults })
}

// DeleteMeshMetric detaches a MeshMetric; false if it was not there.
func (s *Server) DeleteMeshMetric(mesh, name, policy string) bool {
	return deletePolicy(s, mesh, name, "MeshMetric", policy, func(p *ProxyPolicies) map[string]MeshMetric { return p.MeshMetrics })
}

// setPolicy checks the names and then the policy (check), and applies set.
func (s *Server) setPolicy(mesh, name, kind, policy string, check func() error, set func(*ProxyPolicies)) error {
	if err := checkProxyRef(mesh, name); err != nil {
		return err
	}
	if err := checkPolicyName(kind, policy); err != nil {
		return err
	}
	if err := check(); err != nil {
		return fmt.Errorf("%s %s: %w", kind, policy, err)
	}
	s.updatePolicies(mesh, name, set)
	s.log.printf("policy %s %q set on %s.%s", kind, policy, mesh, name)
	return nil
}

// deletePolicy removes policy from the map of its kind; false if it was
// not there.
func deletePolicy[P any](s *Server, mesh, name, kind, policy string, of func(*ProxyPolicies) map[string]P) bool {
	found := false
	s.updatePolicies(mesh, name, func(p *ProxyPolicies) {
		m := of(p)
		_, found = m[policy]
		delete(m, policy)
	})
	if found {
		s.log.printf("policy %s %q removed from %s.%s", kind, policy, mesh, name)
	}
	return found
}

// WithholdZoneListeners stops (true) or resumes (false) sending the zone
// proxy's zone listeners and their clusters, as kuma-cp does for an
// ingress without MeshService or an egress without MeshIdentity or
// MeshExternalService. A connected proxy gets the change at once.
func (s *Server) WithholdZoneListeners(mesh, name string, withhold bool) error {
	if err := checkProxyRef(mesh, name); err != nil {
		return err
	}
	s.updatePolicies(mesh, name, func(p *ProxyPolicies) { p.WithholdZoneListeners = withhold })
	s.log.printf("zone listeners of %s.%s withheld=%t", mesh, name, withhold)
	return nil
}

// mergedMeshMetric folds the MeshMetrics in name order; nil without any.
func (p ProxyPolicies) mergedMeshMetric() *MeshMetric {
	if len(p.MeshMetrics) == 0 {
		return nil
	}
	names := make([]string, 0, len(p.MeshMetrics))
	for n := range p.MeshMetrics {
		names = append(names, n)
	}
	sort.Strings(names)
	var out MeshMetric
	for _, n := range names {
		m := p.MeshMetrics[n]
		if m.Sidecar != nil {
			out.Sidecar = m.Sidecar
		}
		if len(m.Backends) > 0 {
			out.Backends = m.Backends
		}
	}
	return &out
}

// accessLogsInOrder lists the MeshAccessLogs by name.
func (p ProxyPolicies) accessLogsInOrder() []MeshAccessLog {
	names := make([]string, 0, len(p.MeshAccessLogs))
	for n := range p.MeshAccessLogs {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]MeshAccessLog, 0, len(names))
	for _, n := range names {
		out = append(out, p.MeshAccessLogs[n])
	}
	return out
}

// refreshIntervalString is how kuma's k8s Duration marshals.
func refreshIntervalString(s string) string {
	d := defaultRefreshInterval
	if s != "" {
		d, _ = time.ParseDuration(s)
	}
	return d.String()
}

// decodeStrict decodes one JSON document and rejects unknown fields.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON document")
	}
	return nil
}

// SetPolicies replaces everything attached to the zone proxy mesh/name,
// validating each policy first (nothing changes on an error).
func (s *Server) SetPolicies(mesh, name string, p ProxyPolicies) error {
	if err := checkProxyRef(mesh, name); err != nil {
		return err
	}
	next := ProxyPolicies{MeshAccessLogs: map[string]MeshAccessLog{}, MeshMetrics: map[string]MeshMetric{}, WithholdZoneListeners: p.WithholdZoneListeners}
	for policy, m := range p.MeshAccessLogs {
		if err := checkPolicyName("MeshAccessLog", policy); err != nil {
			return err
		}
		if err := m.validate(); err != nil {
			return fmt.Errorf("MeshAccessLog %s: %w", policy, err)
		}
		next.MeshAccessLogs[policy] = m
	}
	for policy, m := range p.MeshMetrics {
		if err := checkPolicyName("MeshMetric", policy); err != nil {
			return err
		}
		withDefaults, err := m.withDefaults()
		if err != nil {
			return fmt.Errorf("MeshMetric %s: %w", policy, err)
		}
		next.MeshMetrics[policy] = withDefaults
	}
	s.updatePolicies(mesh, name, func(cur *ProxyPolicies) { *cur = next })
	s.log.printf("policies of %s.%s set: %d MeshAccessLog, %d MeshMetric, zone listeners withheld=%t",
		mesh, name, len(next.MeshAccessLogs), len(next.MeshMetrics), next.WithholdZoneListeners)
	return nil
}

// LoadPolicies reads a JSON object keyed by "<mesh>/<name>" whose values
// are ProxyPolicies, e.g.
//
//	{"payments/zp-egress-1": {"meshMetrics": {"m": {"backends": [{"type": "Prometheus", "prometheus": {}}]}}}}
func (s *Server) LoadPolicies(data []byte) error {
	var all map[string]ProxyPolicies
	if err := decodeStrict(data, &all); err != nil {
		return fmt.Errorf("policies: %w", err)
	}
	for key, p := range all {
		mesh, name, ok := strings.Cut(key, "/")
		if !ok {
			return fmt.Errorf("policies: key %q must be <mesh>/<name>", key)
		}
		if err := s.SetPolicies(mesh, name, p); err != nil {
			return fmt.Errorf("policies %s: %w", key, err)
		}
	}
	return nil
}
