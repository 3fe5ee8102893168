package cli

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
)

// loadConfig reads every setting into a Config. Every setting is read from
// the environment and the file, so that one env file and config serve every
// command; the command's flags override them. Every unreadable value is
// reported, not just the first. The source answers for settings outside
// the Config, and says where each value came from.
func loadConfig(fs *pflag.FlagSet) (*config.Config, *source, error) {
	src := newSource(fs)
	errs := multierror.Append(nil, unknownVariables()...)
	if err := src.readFile(); err != nil {
		return nil, nil, multierror.Append(errs, err)
	}
	errs = multierror.Append(errs, src.unknownKeys()...)
	c := &config.Config{}
	for _, st := range config.Settings() {
		if dst, ok := st.Field(c); ok {
			errs = multierror.Append(errs, src.decode(st.Key, dst))
		}
	}
	// Given, if only as "": viper's IsSet would count the default too.
	c.StateDirSet = src.origin(config.KeyStateDir) != fromDefault
	return c, src, errs.ErrorOrNil()
}

// origin is where a setting's value came from.
type origin int

const (
	fromDefault origin = iota
	fromFlag
	fromEnv
	fromFile
)

// source resolves each setting with viper: flags > env ZONEPROXY_* > the
// --config file > defaults.
type source struct {
	v     *viper.Viper
	flags *pflag.FlagSet
	path  string         // the --config file, "" for none
	file  map[string]any // its settings, scalars as written (fileValues)
}

func newSource(fs *pflag.FlagSet) *source {
	v := viper.New()
	v.AllowEmptyEnv(true) // ZONEPROXY_X= clears what the file sets
	for _, s := range config.Settings() {
		name := string(s.Key)
		if s.Kind != config.KindList {
			v.SetDefault(name, s.Default)
		}
		_ = v.BindEnv(name, s.Key.Env()) // errs only without a key
		f := fs.Lookup(name)
		switch {
		case f == nil:
		case s.Kind == config.KindList:
			_ = v.BindPFlag(name, f) // errs only for a nil flag
		default:
			// As typed: BindPFlag casts int and bool flags, reading "lots" as 0.
			_ = v.BindFlagValue(name, textFlag{f})
		}
	}
	return &source{v: v, flags: fs}
}

// textFlag shows viper a flag's value as the operator typed it.
type textFlag struct{ f *pflag.Flag }

func (t textFlag) HasChanged() bool    { return t.f.Changed }
func (t textFlag) Name() string        { return t.f.Name }
func (t textFlag) ValueString() string { return t.f.Value.String() }
func (t textFlag) ValueType() string   { return "string" }

// origin says which source gives the setting's value, for messages and
// "was it given": viper does not tell.
func (s *source) origin(k config.Key) origin {
	if f := s.flags.Lookup(string(k)); f != nil && f.Changed {
		return fromFlag
	}
	if _, ok := os.LookupEnv(k.Env()); ok {
		return fromEnv
	}
	if _, ok := s.file[string(k)]; ok {
		return fromFile
	}
	return fromDefault
}

func (s *source) lookup(k config.Key) (any, origin) {
	o := s.origin(k)
	switch {
	case o == fromFlag:
		if repeated, ok := s.flags.Lookup(string(k)).Value.(pflag.SliceValue); ok {
			return repeated.GetSlice(), o // as given: viper re-reads them as CSV, losing a lone ""
		}
	case o == fromFile && k == config.KeyLabel:
		return s.file[string(k)], o // viper lower-cases map keys; labels keep their case
	case o == fromEnv:
		// An empty variable clears what the file sets: for a number, a
		// duration or a switch that means its default.
		if st, ok := config.Lookup(string(k)); ok && st.Kind != config.KindText && st.Kind != config.KindList && os.Getenv(k.Env()) == "" {
			return st.Default, fromDefault
		}
	}
	return s.v.Get(string(k)), o
}

// text is a setting as a trimmed string, "" when unset.
func (s *source) text(k config.Key) string {
	v, _ := s.lookup(k)
	return toText(v)
}

// decode converts a setting into *dst as dst's type wants; a value that
// does not convert is a Problem that names the setting and the fix.
func (s *source) decode(k config.Key, dst any) error {
	v, _ := s.lookup(k)
	var err error
	switch d := dst.(type) {
	case *string:
		*d, err = toString(v)
	case *int:
		*d, err = toInt(v)
	case *time.Duration:
		*d, err = toDuration(v)
	case *bool:
		*d, err = toBool(v)
	case *map[string]string:
		*d, err = toLabels(v)
	case *[]string:
		*d, err = toArgs(v)
	default:
		panic(fmt.Sprintf("cli: cannot decode %s into %T", k.Flag(), dst))
	}
	if err != nil {
		return config.Problem{Key: k, Message: err.Error()}
	}
	return nil
}

// readFile parses the --config file, if one is named, and hands it to
// viper.
func (s *source) readFile() error {
	s.path = s.text(config.KeyConfig)
	if s.path == "" {
		return nil
	}
	raw, err := readConfigFile(s.path)
	if err != nil {
		return config.Problem{Key: config.KeyConfig, Message: fmt.Sprintf("cannot read %s: %v", s.path, errtext.PathCause(err))}
	}
	if s.file, err = fileValues(raw); err != nil {
		return config.Problem{Key: config.KeyConfig, Message: fmt.Sprintf("%s is not valid YAML: %v", s.path, err)}
	}
	// A copy: viper lower-cases the keys of the map it is given, in place.
	if m, ok := deepCopy(s.file).(map[string]any); ok && m != nil {
		return s.v.MergeConfigMap(m)
	}
	return nil
}

// deepCopy copies fileValues' maps and lists; other values are immutable.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// unknownKeys are the file's keys that are no setting, sorted.
func (s *source) unknownKeys() []error {
	var out []error
	for _, k := range slices.Sorted(maps.Keys(s.file)) {
		if _, ok := lookupSetting(k); !ok || k == string(config.KeyConfig) {
			out = append(out, config.Problem{Key: config.KeyConfig, Message: fmt.Sprintf("unknown key %q in %s%s", errtext.Value(k), s.path, suggest(k))})
		}
	}
	return out
}

// unknownVariables are the ZONEPROXY_ variables that are no setting: a
// misspelt one would otherwise be ignored without a word.
func unknownVariables() []error {
	var out []error
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) {
			continue
		}
		key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, envPrefix), "_", "-"))
		switch _, ok := lookupSetting(key); {
		case !ok:
			out = append(out, config.Problem{Key: config.Key(name), Message: "not a setting of zoneproxy" + suggestEnv(key)})
		case name != envName(key): // only the upper-case name is read
			out = append(out, config.Problem{Key: config.Key(name), Message: "not a setting of zoneproxy (did you mean " + envName(key) + "? variable names are upper case)"})
		}
	}
	return out
}

func toText(v any) string {
	if v == nil {
		return ""
	}
	return strings.TrimSpace(fmt.Sprint(v))
}

// isCollection: v is a map or a list, a YAML value where one was expected.
func isCollection(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// toString is a text setting's value. A map or a list is refused: Go
// would print it as map[a:1] and the setting would take that as its value.
func toString(v any) (string, error) {
	if isCollection(v) {
		return "", fmt.Errorf("%s is not one value: give text, e.g. key: value", errtext.Show(v))
	}
	return toText(v), nil
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
	return 0, fmt.Errorf("%s is not a whole number", errtext.Show(v))
}

func toBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(x)); err == nil {
			return b, nil
		}
		return false, fmt.Errorf("%q is not true or false", errtext.Value(x))
	}
	return false, fmt.Errorf("%s is not true or false", errtext.Show(v))
}

// toDuration accepts Go durations ("30s", "1m30s"); a bare number is
// refused because its unit would be a guess.
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
	if isCollection(v) {
		return 0, fmt.Errorf("%s is not a duration: write e.g. 30s, 1m or 500ms", errtext.Show(v))
	}
	return 0, fmt.Errorf("%q is not a duration: write e.g. 30s, 1m or 500ms", errtext.Value(fmt.Sprint(v)))
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
			if isCollection(e) {
				return nil, fmt.Errorf("%s is not key=value: give one key=value string per item", errtext.Show(e))
			}
			pairs = append(pairs, fmt.Sprint(e))
		}
	case map[string]any:
		out := make(map[string]string, len(x))
		for k, val := range x {
			if isCollection(val) {
				return nil, fmt.Errorf("%s: %s is not one value: give a label value, e.g. %s: payments", errtext.Value(k), errtext.Show(val), errtext.Arg(k))
			}
			out[k] = toText(val)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("labels must be key=value pairs, got %s", errtext.Show(v))
	}
	out := map[string]string{}
	var bad []string
	for _, p := range pairs {
		k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || k == "" {
			bad = append(bad, fmt.Sprintf("%q", errtext.Value(p)))
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
			if isCollection(e) {
				return nil, fmt.Errorf("%s is not an argument: give one string per argument", errtext.Show(e))
			}
			out = append(out, fmt.Sprint(e))
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s is not a list of arguments: give one string per argument", errtext.Show(v))
}

// envPrefix starts every environment variable zoneproxy reads.
const envPrefix = config.EnvPrefix

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
	var names []string
	for _, s := range config.Settings() {
		if s.Key != config.KeyConfig {
			names = append(names, string(s.Key))
		}
	}
	return names
}

// closest is the candidate at most three edits from name, or one that
// starts with it or that it starts with ("mesh-name": "mesh"), or "".
func closest(name string, candidates []string) string {
	if len(name) > 64 { // no setting is this long: not a typo of one
		return ""
	}
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
