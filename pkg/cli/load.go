package cli

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	yaml "go.yaml.in/yaml/v3"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
)

// loadConfig merges flags > env ZONEPROXY_* > config file > defaults into
// a Config. Every setting is read from the environment and the file, so
// that one env file and config serve every command; the command's flags
// override them. Every unreadable value is reported, not just the first.
// The viper instance answers for settings outside the Config.
func loadConfig(fs *pflag.FlagSet) (*config.Config, *viper.Viper, error) {
	v := viper.New()
	v.SetEnvPrefix(strings.TrimSuffix(envPrefix, "_"))
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	v.AllowEmptyEnv(true) // ZONEPROXY_X= clears what the file sets
	for _, s := range settings {
		if s.kind != list {
			v.SetDefault(s.name, s.def)
		}
	}
	if err := v.BindPFlags(fs); err != nil {
		return nil, nil, err
	}
	var errs *multierror.Error
	add := func(key, format string, args ...any) {
		errs = multierror.Append(errs, config.Problem{Key: key, Message: fmt.Sprintf(format, args...)})
	}
	// A misspelt variable would otherwise be ignored without a word.
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) {
			continue
		}
		key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, envPrefix), "_", "-"))
		if _, ok := lookupSetting(key); !ok {
			add(name, "not a setting of zoneproxy%s", suggestEnv(key))
		}
	}

	if path := v.GetString("config"); path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			add("config", "cannot read %s: %v", path, errtext.PathCause(err))
			return nil, nil, errs
		}
		keys, err := topLevelKeys(raw)
		if err != nil {
			add("config", "%s is not valid YAML: %v", path, err)
			return nil, nil, errs
		}
		for _, k := range keys {
			if _, ok := lookupSetting(k); !ok || k == "config" {
				add("config", "unknown key %q in %s%s", k, path, suggest(k))
			}
		}
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			add("config", "cannot load %s: %v", path, err)
			return nil, nil, errs
		}
	}

	c := &config.Config{}
	str := func(key string) string {
		if x := v.Get(key); x != nil {
			return strings.TrimSpace(fmt.Sprint(x))
		}
		return ""
	}
	num := func(key string) int {
		n, err := toInt(v.Get(key))
		if err != nil {
			add(key, "%v", err)
		}
		return n
	}
	dur := func(key string) time.Duration {
		d, err := toDuration(v.Get(key))
		if err != nil {
			add(key, "%v", err)
		}
		return d
	}
	flag := func(key string) bool {
		b, err := toBool(v.Get(key))
		if err != nil {
			add(key, "%v", err)
		}
		return b
	}
	// Repeated flags are taken as given: viper would split them as CSV.
	repeated := func(key string) any {
		if f := fs.Lookup(key); f != nil && f.Changed {
			vals, _ := fs.GetStringArray(key)
			return vals
		}
		return v.Get(key)
	}
	c.Mesh = str("mesh")
	c.Role = config.Role(str("role"))
	c.Name = str("name")
	c.Workload = str("workload")
	labels, err := toLabels(repeated("label"))
	if err != nil {
		add("label", "%v", err)
	}
	c.Labels = labels
	c.Address = str("address")
	c.IngressPort = num("ingress-port")
	c.EgressPort = num("egress-port")
	c.AdminPort = num("admin-port")
	c.CPAddress = str("cp-address")
	c.CACertFile = str("ca-cert-file")
	c.DataplaneTokenFile = str("dataplane-token-file")
	c.DataplaneToken = str("dataplane-token")
	c.EnvoyBinary = str("envoy-binary")
	c.WorkDir = str("work-dir")
	c.ReadinessPort = num("readiness-port")
	c.MetricsAddress = str("metrics-address")
	c.DrainTime = dur("drain-time")
	c.DrainMin = dur("drain-min")
	c.XDSRelay = flag("xds-relay")
	c.StateDir = str("state-dir")
	c.StateDirSet = v.IsSet("state-dir")
	c.CacheMaxAge = dur("cache-max-age")
	c.EnvoyLogLevel = str("envoy-log-level")
	c.EnvoyComponentLogLevel = str("envoy-component-log-level")
	c.Concurrency = num("concurrency")
	envoyArgs, err := toArgs(repeated("envoy-arg"))
	if err != nil {
		add("envoy-arg", "%v", err)
	}
	c.EnvoyArgs = envoyArgs
	c.RetryInitial = dur("retry-initial")
	c.RetryMax = dur("retry-max")
	c.BootstrapTimeout = dur("bootstrap-timeout")
	c.LogLevel = str("log-level")
	c.LogFormat = str("log-format")
	return c, v, errs.ErrorOrNil()
}

func topLevelKeys(raw []byte) ([]string, error) {
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, nil
}

func toInt(v any) (int, error) {
	switch x := v.(type) {
	case int:
		return x, nil
	case int64:
		return int(x), nil
	case uint64:
		return int(x), nil
	case float64:
		if x == float64(int(x)) {
			return int(x), nil
		}
	case string:
		if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%v is not a whole number", v)
}

// toDuration accepts Go durations ("30s", "1m30s"); a bare number is
// refused because its unit would be a guess.
func toBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(x)); err == nil {
			return b, nil
		}
		return false, fmt.Errorf("%q is not true or false", x)
	}
	return false, fmt.Errorf("%v is not true or false", v)
}

func toDuration(v any) (time.Duration, error) {
	switch x := v.(type) {
	case time.Duration:
		return x, nil
	case string:
		d, err := time.ParseDuration(strings.TrimSpace(x))
		if err == nil {
			return d, nil
		}
		if _, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			return 0, fmt.Errorf("%s has no unit: write a duration such as %ss", strings.TrimSpace(x), strings.TrimSpace(x))
		}
	case int, int64, float64:
		return 0, fmt.Errorf("%v has no unit: write a duration such as %vs", v, v)
	}
	return 0, fmt.Errorf("%q is not a duration: write e.g. 30s, 1m or 500ms", fmt.Sprint(v))
}

// toLabels accepts repeated k=v flags, "k=v,k2=v2" from env, or a YAML
// list of k=v strings or a map.
func toLabels(v any) (map[string]string, error) {
	var pairs []string
	switch x := v.(type) {
	case nil:
	case []string:
		pairs = x
	case string:
		if strings.TrimSpace(x) != "" {
			pairs = strings.Split(x, ",")
		}
	case []any:
		for _, e := range x {
			pairs = append(pairs, fmt.Sprint(e))
		}
	case map[string]any:
		out := make(map[string]string, len(x))
		for k, val := range x {
			out[k] = fmt.Sprint(val)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("labels must be key=value pairs, got %v", v)
	}
	out := map[string]string{}
	var bad []string
	for _, p := range pairs {
		k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || k == "" {
			bad = append(bad, fmt.Sprintf("%q", p))
			continue
		}
		out[k] = val
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("%s is not key=value", strings.Join(bad, ", "))
	}
	return out, nil
}

// toArgs accepts repeated flags (one argument each), a YAML list (one
// argument per item) or a string of space-separated arguments.
func toArgs(v any) ([]string, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []string:
		return x, nil
	case string:
		return strings.Fields(x), nil
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				return nil, fmt.Errorf("%v is not an argument: give one string per argument", e)
			}
			out = append(out, fmt.Sprint(e))
		}
		return out, nil
	}
	return nil, fmt.Errorf("%v is not a list of arguments: give one string per argument", v)
}

// envPrefix starts every environment variable zoneproxy reads.
const envPrefix = "ZONEPROXY_"

func suggestEnv(key string) string {
	if use, ok := kumaDPEquivalent(key); ok && use != "" {
		return fmt.Sprintf(" (kuma-dp's --%s is %s here)", key, envName(use))
	}
	if best := closest(key, settingNames()); best != "" {
		return fmt.Sprintf(" (did you mean %s?)", envName(best))
	}
	return " (variables are ZONEPROXY_ plus a flag name of `zoneproxy run --help` in upper case, - as _)"
}

// suggest names the closest setting to a mistyped config key.
func suggest(key string) string {
	if use, ok := kumaDPEquivalent(key); ok && use != "" {
		return fmt.Sprintf(" (kuma-dp's --%s is %q here)", key, use)
	}
	if best := closest(key, settingNames()); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return " (keys are the flag names of `zoneproxy run --help`)"
}

func settingNames() []string {
	names := make([]string, 0, len(settings))
	for _, s := range settings {
		if s.name != "config" {
			names = append(names, s.name)
		}
	}
	return names
}

// closest is the candidate at most three edits from name, or one that
// starts with it or that it starts with ("mesh-name": "mesh"), or "".
func closest(name string, candidates []string) string {
	best, bestD := "", 4
	for _, c := range candidates {
		d := editDistance(name, c)
		if min(len(name), len(c)) >= 3 && (strings.HasPrefix(c, name) || strings.HasPrefix(name, c)) {
			d = min(d, 3)
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance counts the insertions, deletions, substitutions and swaps
// of neighbours that turn a into b ("tmie" is one swap from "time").
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
