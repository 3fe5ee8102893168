package cli

import (
	"fmt"
	"slices"

	"github.com/spf13/pflag"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// rawValue keeps a number or duration flag as typed, so that a bad value
// is reported with every other problem instead of stopping flag parsing.
type rawValue struct {
	value, kind string
}

func (r *rawValue) String() string     { return r.value }
func (r *rawValue) Set(s string) error { r.value = s; return nil }
func (r *rawValue) Type() string       { return r.kind }

// Which settings each command takes as flags.
var (
	// dataplaneFlags shape the Dataplane resource.
	dataplaneFlags = []config.Key{config.KeyConfig, config.KeyMesh, config.KeyRole, config.KeyName, config.KeyWorkload, config.KeyLabel,
		config.KeyAddress, config.KeyIngressPort, config.KeyEgressPort, config.KeyAdminPort}
	// bootstrapFlags are what one bootstrap request needs.
	bootstrapFlags = append(slices.Clone(dataplaneFlags), config.KeyCPAddress, config.KeyCACertFile,
		config.KeyDataplaneTokenFile, config.KeyDataplaneToken, config.KeyEnvoyBinary, config.KeyWorkDir, config.KeyReadinessPort)
	// runFlags are every setting of the zone proxy; check validates them all.
	runFlags = runSettings()
	// meshZoneAddressFlags describe the ingress as other zones reach it.
	meshZoneAddressFlags = append([]config.Key{config.KeyConfig, config.KeyMesh, config.KeyRole, config.KeyName, config.KeyAddress, config.KeyIngressPort},
		meshZoneAddressOnly()...)
)

// runSettings are --config and every setting a Config holds.
func runSettings() []config.Key {
	var out []config.Key
	for _, s := range config.Settings() {
		if _, ok := s.Field(&config.Config{}); ok || s.Key == config.KeyConfig {
			out = append(out, s.Key)
		}
	}
	return out
}

// meshZoneAddressOnly are the settings no zone proxy's Config holds.
func meshZoneAddressOnly() []config.Key {
	var out []config.Key
	for _, s := range config.Settings() {
		if _, ok := s.Field(&config.Config{}); !ok && s.Key != config.KeyConfig {
			out = append(out, s.Key)
		}
	}
	return out
}

func lookupSetting(name string) (config.Setting, bool) { return config.Lookup(name) }

// envName is the environment variable of a setting.
func envName(name string) string { return config.Key(name).Env() }

// addFlags declares the named settings as flags; the help names each one's
// environment variable.
func addFlags(fs *pflag.FlagSet, keys ...config.Key) {
	for _, k := range keys {
		s := config.MustLookup(k)
		name, usage := string(s.Key), fmt.Sprintf("%s (env %s)", s.Usage, s.Key.Env())
		switch s.Kind {
		case config.KindText:
			fs.String(name, s.Default, usage)
		case config.KindNumber:
			fs.Var(&rawValue{s.Default, "int"}, name, usage)
		case config.KindDuration:
			fs.Var(&rawValue{s.Default, "duration"}, name, usage)
		case config.KindBool:
			fs.Var(&rawValue{s.Default, "bool"}, name, usage)
			fs.Lookup(name).NoOptDefVal = "true"
		case config.KindList:
			fs.StringArray(name, nil, usage)
		}
	}
}
