package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// notSettings are Config's fields that no operator sets: Complete and
// the loader fill them in.
var notSettings = []string{"AddressChosen", "StateDirSet", "derivedName", "derivedWorkload"}

// A field added to Config without a declaration would be neither a flag,
// a variable nor a key, and a reload would not know what to do with it.
func TestEveryConfigFieldHasOneDeclaration(t *testing.T) {
	var c Config
	base := reflect.ValueOf(&c).Pointer()
	declared := map[uintptr]Key{}
	for _, s := range Settings() {
		dst, ok := s.Field(&c)
		if !ok {
			continue
		}
		at := reflect.ValueOf(dst).Pointer() - base
		if other, dup := declared[at]; dup {
			t.Errorf("%s and %s land in one field", s.Key.Flag(), other.Flag())
		}
		declared[at] = s.Key
	}
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		_, ok := declared[f.Offset]
		switch skip := slices.Contains(notSettings, f.Name); {
		case !ok && !skip:
			t.Errorf("Config.%s has no declaration in settings (pkg/config/declarations.go)", f.Name)
		case ok && skip:
			t.Errorf("Config.%s is declared but listed as no setting", f.Name)
		}
	}
}

// No two settings share a flag, a variable or a kuma-dp name.
func TestNoTwoSettingsShareAName(t *testing.T) {
	flags, envs, kumaDP := map[string]Key{}, map[string]Key{}, map[string]Key{}
	claim := func(seen map[string]Key, name string, k Key) {
		if other, dup := seen[name]; dup {
			t.Errorf("%s and %s are both %q", k.Flag(), other.Flag(), name)
		}
		seen[name] = k
	}
	for _, s := range Settings() {
		if s.Key == "" || strings.ToLower(string(s.Key)) != string(s.Key) || strings.ContainsAny(string(s.Key), "_ ") {
			t.Errorf("%q is not a flag name: lower case words joined by -", s.Key)
		}
		if s.Usage == "" {
			t.Errorf("%s has no help", s.Key.Flag())
		}
		claim(flags, string(s.Key), s.Key)
		claim(envs, s.Key.Env(), s.Key)
		names := s.KumaDPAlso
		if s.KumaDP {
			names = append([]string{string(s.Key)}, names...)
		}
		for _, n := range names {
			claim(kumaDP, n, s.Key)
		}
	}
}

// Each kind of value has the field it decodes into, and the text a reload
// compares.
func TestSettingText(t *testing.T) {
	c := &Config{Role: RoleEgress, Labels: map[string]string{"b": "2", "a": "1"}, EnvoyArgs: []string{"--x", "y"},
		Concurrency: 4, XDSRelay: true, DrainTime: DefaultDrainTime}
	for _, tc := range []struct {
		key  Key
		kind Kind
		want string
	}{
		{KeyRole, KindText, "egress"},
		{KeyLabel, KindList, "a=1,b=2"},
		{KeyEnvoyArg, KindList, "--x y"},
		{KeyConcurrency, KindNumber, "4"},
		{KeyXDSRelay, KindBool, "true"},
		{KeyDrainTime, KindDuration, "30s"},
		{KeyMesh, KindText, ""},
		{KeyZone, KindText, ""}, // no field: another command's
	} {
		s := MustLookup(tc.key)
		if got := s.Text(c); got != tc.want || s.Kind != tc.kind {
			t.Errorf("%s: %q (kind %d), want %q (kind %d)", tc.key.Flag(), got, s.Kind, tc.want, tc.kind)
		}
	}
	if got := KeyDataplaneTokenFile.Env(); got != "ZONEPROXY_DATAPLANE_TOKEN_FILE" {
		t.Errorf("variable %s", got)
	}
}
