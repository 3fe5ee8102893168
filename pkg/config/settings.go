package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config/key"
)

// Key names a setting (package key, which packages pkg/config imports use
// too).
type Key = key.Key

// The settings' names; Settings declares each one.
const (
	KeyConfig                 = key.Config
	KeyMesh                   = key.Mesh
	KeyRole                   = key.Role
	KeyName                   = key.Name
	KeyWorkload               = key.Workload
	KeyLabel                  = key.Label
	KeyAddress                = key.Address
	KeyIngressPort            = key.IngressPort
	KeyEgressPort             = key.EgressPort
	KeyAdminPort              = key.AdminPort
	KeyCPAddress              = key.CPAddress
	KeyCACertFile             = key.CACertFile
	KeyDataplaneTokenFile     = key.DataplaneTokenFile
	KeyDataplaneToken         = key.DataplaneToken
	KeyEnvoyBinary            = key.EnvoyBinary
	KeyWorkDir                = key.WorkDir
	KeyReadinessPort          = key.ReadinessPort
	KeyHealthAddress          = key.HealthAddress
	KeyMetricsAddress         = key.MetricsAddress
	KeyDrainTime              = key.DrainTime
	KeyDrainMin               = key.DrainMin
	KeyXDSRelay               = key.XDSRelay
	KeyStateDir               = key.StateDir
	KeyCacheMaxAge            = key.CacheMaxAge
	KeyEnvoyLogLevel          = key.EnvoyLogLevel
	KeyEnvoyComponentLogLevel = key.EnvoyComponentLogLevel
	KeyConcurrency            = key.Concurrency
	KeyEnvoyArg               = key.EnvoyArg
	KeyRetryInitial           = key.RetryInitial
	KeyRetryMax               = key.RetryMax
	KeyBootstrapTimeout       = key.BootstrapTimeout
	KeyLogLevel               = key.LogLevel
	KeyLogFormat              = key.LogFormat
	KeyZone                   = key.Zone
	KeyAdvertisedAddress      = key.AdvertisedAddress
	KeyAdvertisedPort         = key.AdvertisedPort
)

// EnvPrefix starts every environment variable zoneproxy reads.
const EnvPrefix = key.EnvPrefix

// Kind is how a setting's value is written.
type Kind int

const (
	KindText Kind = iota
	KindNumber
	KindDuration
	KindBool
	KindList // a repeatable flag
)

// OnReload is what a reload does with a changed setting.
type OnReload int

const (
	// ReloadApplies: the agent applies it (token file, drain times, its
	// own listeners, …); settings outside the Config do nothing.
	ReloadApplies OnReload = iota
	// ReloadHandsOver: Envoy's launch; a new Envoy beside the old applies it.
	ReloadHandsOver
	// ReloadRestarts: the proxy's identity, its Dataplane, where its xDS
	// goes, its work dir: in the running Envoy's bootstrap, so a reload
	// refuses it and only a restart applies it.
	ReloadRestarts
)

// Setting declares one setting: everything the flags, the environment,
// the config file, messages, reloads and the kuma-dp mapping know of it.
type Setting struct {
	Key     Key
	Kind    Kind
	Default string // as it would be typed; "" for none
	Usage   string // --help's words; the variable's name is added
	Reload  OnReload
	// KumaDP: kuma-dp's run has this flag under the same name; KumaDPAlso
	// are its other names for it, earlier releases' included.
	KumaDP     bool
	KumaDPAlso []string
	// field is where the setting lands in a Config; nil for settings of
	// other commands (--config, render meshzoneaddress's own).
	field func(*Config) any
}

// Field is where s lands in c (a *string, *int, *time.Duration, *bool,
// *[]string or *map[string]string), and false when it has no field.
func (s Setting) Field(c *Config) (any, bool) {
	if s.field == nil {
		return nil, false
	}
	return s.field(c), true
}

// Text is s's value in c written out: label k=v,… sorted, envoy-arg
// space-separated, numbers and switches as fmt prints them.
func (s Setting) Text(c *Config) string {
	dst, ok := s.Field(c)
	if !ok {
		return ""
	}
	switch d := dst.(type) {
	case *string:
		return *d
	case *map[string]string:
		pairs := make([]string, 0, len(*d))
		for _, k := range slices.Sorted(maps.Keys(*d)) {
			pairs = append(pairs, k+"="+(*d)[k])
		}
		return strings.Join(pairs, ",")
	case *[]string:
		return strings.Join(*d, " ")
	case *int:
		return fmt.Sprint(*d)
	case *bool:
		return fmt.Sprint(*d)
	case *time.Duration:
		return d.String()
	}
	panic(fmt.Sprintf("config: no text for %s (%T)", s.Key.Flag(), dst))
}

// Lookup finds a setting by name.
func Lookup(name string) (Setting, bool) {
	for _, s := range settings {
		if string(s.Key) == name {
			return s, true
		}
	}
	return Setting{}, false
}

// MustLookup is Lookup of a declared key.
func MustLookup(k Key) Setting {
	s, ok := Lookup(string(k))
	if !ok {
		panic("config: no setting " + string(k))
	}
	return s
}

// Settings are every setting, in --help's order.
func Settings() []Setting { return slices.Clone(settings) }

// Texts are the settings of c that a reload treats as one of whats,
// written out by Text, by name.
func Texts(c *Config, whats ...OnReload) map[string]string {
	out := map[string]string{}
	for _, s := range settings {
		if s.field != nil && slices.Contains(whats, s.Reload) {
			out[string(s.Key)] = s.Text(c)
		}
	}
	return out
}
