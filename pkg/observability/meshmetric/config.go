package meshmetric

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// Profile names (MeshMetric sidecar.profiles.appendProfiles[].name).
const (
	ProfileAll   = "All"
	ProfileBasic = "Basic"
	ProfileNone  = "None"
)

// Selector types (sidecar.profiles.{exclude,include}[].type).
const (
	SelectorPrefix   = "Prefix"
	SelectorRegex    = "Regex"
	SelectorExact    = "Exact"
	SelectorContains = "Contains"
)

// Config is observability.metrics of the dynconf /meshmetric body
// (kuma's meshmetric dpapi.MeshMetricDpConfig). Build it with Parse, which
// also compiles the profile filter; applications are ignored, as a zone
// proxy has none.
type Config struct {
	Backends    []Backend         `json:"backends"`
	Sidecar     *Sidecar          `json:"sidecar,omitempty"`
	ExtraLabels map[string]string `json:"extraLabels"`

	filter *filter
	labels []*dto.LabelPair
}

// Backend is where metrics go: type Prometheus (the hijacker serves it) or
// OpenTelemetry (pushed to OpenTelemetry.Endpoint, a Unix socket path).
type Backend struct {
	Type          string                `json:"type"`
	Name          *string               `json:"name"`
	OpenTelemetry *OpenTelemetryBackend `json:"openTelemetry,omitempty"`
}

// OpenTelemetryBackend is an OTLP push target.
type OpenTelemetryBackend struct {
	Endpoint        string   `json:"endpoint"`
	RefreshInterval Duration `json:"refreshInterval"`
}

// Duration reads a Kubernetes-style duration string ("10s", "1m0s").
type Duration time.Duration

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("refreshInterval: want a duration string such as \"10s\", got %s", b)
	}
	if s == "" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("refreshInterval: %q is not a duration such as \"10s\"", s)
	}
	*d = Duration(v)
	return nil
}

// Sidecar is MeshMetric's sidecar section: which Envoy metrics to keep.
type Sidecar struct {
	Profiles      *Profiles `json:"profiles,omitempty"`
	IncludeUnused bool      `json:"includeUnused,omitempty"`
}

// Profiles picks families by profile, then exclude, then include. The
// broadest profile listed applies, Basic when none is; unknown profile
// names are ignored and unknown selector types match nothing, so a newer
// control plane's additions degrade rather than fail.
type Profiles struct {
	AppendProfiles []Profile  `json:"appendProfiles,omitempty"`
	Exclude        []Selector `json:"exclude,omitempty"`
	Include        []Selector `json:"include,omitempty"`
}

// Profile is one named profile: All, Basic or None.
type Profile struct {
	Name string `json:"name"`
}

// Selector matches a family name.
type Selector struct {
	Type  string `json:"type"`
	Match string `json:"match"`
}

type body struct {
	Observability struct {
		Metrics Config `json:"metrics"`
	} `json:"observability"`
}

// Parse reads a /meshmetric body. Unknown fields are ignored, so a newer
// control plane's additions do not stop the proxy; malformed JSON, wrong
// types and a Regex selector that does not compile are errors naming the
// field.
func Parse(data []byte) (*Config, error) {
	var b body
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, jsonError(data, err)
	}
	c := &b.Observability.Metrics
	f, err := newFilter(c.Sidecar)
	if err != nil {
		return nil, fmt.Errorf("meshmetric config: %w", err)
	}
	c.filter = f
	c.labels = promLabels(c.ExtraLabels)
	return c, nil
}

func jsonError(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case len(strings.TrimSpace(string(data))) == 0:
		return errors.New("meshmetric config: empty body, want a JSON object")
	case errors.As(err, &syn):
		return fmt.Errorf("meshmetric config: malformed JSON at byte %d: %v", syn.Offset, err)
	case errors.As(err, &typ):
		return fmt.Errorf("meshmetric config: %s: got JSON %s, want %s", typ.Field, typ.Value, typ.Type)
	}
	return fmt.Errorf("meshmetric config: %w", err)
}

// IncludeUnused reports whether Envoy's never-used stats are wanted. A nil
// Config (no policy yet) reports true: kuma-dp asks Envoy for every stat
// until the first config arrives.
func (c *Config) IncludeUnused() bool {
	return c == nil || (c.Sidecar != nil && c.Sidecar.IncludeUnused)
}

// Labels returns ExtraLabels as Prometheus labels, sorted by name: every
// character outside [a-zA-Z0-9_] becomes _ (kuma.proxy_role →
// kuma_proxy_role), and a leading digit gets a _ in front. When two keys
// map to one name, the key sorting first wins. Nil for a nil Config.
func (c *Config) Labels() []*dto.LabelPair {
	if c == nil {
		return nil
	}
	if c.labels == nil && len(c.ExtraLabels) > 0 {
		return promLabels(c.ExtraLabels)
	}
	return c.labels
}

func promLabels(extra map[string]string) []*dto.LabelPair {
	keys := slices.Sorted(maps.Keys(extra))
	out := make([]*dto.LabelPair, 0, len(keys))
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		name := labelName(k)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, &dto.LabelPair{Name: proto.String(name), Value: proto.String(extra[k])})
	}
	slices.SortFunc(out, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

func labelName(k string) string {
	b := []byte(k)
	for i, c := range b {
		if !(c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || (c >= '0' && c <= '9')) {
			b[i] = '_'
		}
	}
	if len(b) > 0 && b[0] >= '0' && b[0] <= '9' {
		return "_" + string(b)
	}
	return string(b)
}

// compileSelector turns a selector into a name matcher. An unknown type
// matches nothing, as in kuma-dp.
func compileSelector(s Selector) (func(string) bool, error) {
	m := s.Match
	switch s.Type {
	case SelectorPrefix:
		return func(n string) bool { return strings.HasPrefix(n, m) }, nil
	case SelectorExact:
		return func(n string) bool { return n == m }, nil
	case SelectorContains:
		return func(n string) bool { return strings.Contains(n, m) }, nil
	case SelectorRegex:
		re, err := regexp.Compile(m)
		if err != nil {
			return nil, fmt.Errorf("invalid regular expression %q: %v", m, err)
		}
		return re.MatchString, nil
	}
	return func(string) bool { return false }, nil
}
