package bootstraprewrite

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// byYAMLv3 is what parse gives without the fast path.
func byYAMLv3(doc []byte) (object, error) {
	var root any
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	m, ok := stringKeys(root).(object)
	if !ok {
		return nil, fmt.Errorf("not a mapping")
	}
	return m, nil
}

// agreesWithYAMLv3 fails when the fast path accepts doc and reads it
// otherwise than yaml.v3 (or accepts what yaml.v3 refuses).
func agreesWithYAMLv3(t *testing.T, doc []byte) (accepted bool) {
	t.Helper()
	fast, ok := parseBlockYAML(doc)
	if !ok {
		return false
	}
	want, err := byYAMLv3(doc)
	if err != nil {
		t.Fatalf("the fast path accepted what yaml.v3 refuses (%v):\n%s", err, doc)
	}
	if !reflect.DeepEqual(fast, want) {
		t.Fatalf("the fast path reads\n%#v\nyaml.v3 reads\n%#v\nfrom\n%s", fast, want, doc)
	}
	return true
}

// The control plane's own bootstraps, every role and both ADS forms, take
// the fast path: that is the half millisecond it saves.
func TestControlPlaneBootstrapsTakeTheFastPath(t *testing.T) {
	for _, role := range []config.Role{config.RoleIngress, config.RoleEgress, config.RoleCombined} {
		b := fetchBootstrap(t, role)
		for name, doc := range map[string][]byte{"envoy_grpc": b.yaml, "google_grpc": asReloadableYAML(t, b)} {
			if !agreesWithYAMLv3(t, doc) {
				t.Errorf("%s/%s: the control plane's bootstrap fell back to yaml.v3", role, name)
			}
		}
	}
}

// asReloadableYAML is the reloadable-token bootstrap as the control plane
// writes it: through sigs.k8s.io/yaml, as kuma-cp does.
func asReloadableYAML(t *testing.T, b cpBootstrap) []byte {
	t.Helper()
	doc, err := sigsyaml.Marshal(mustParse(t, asReloadable(t, b, "/var/run/zoneproxy/token")))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func mustParse(t *testing.T, doc []byte) object {
	t.Helper()
	m, err := byYAMLv3(doc)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBlockYAMLAgreesOrFallsBack(t *testing.T) {
	for _, tc := range []struct {
		doc    string
		accept bool
	}{
		{"a: b\n", true},
		{"a: 1\nb: -2\nc: 0\nd: 007\n", false},
		{"a: 1.5\n", false},
		{"a: 0s\nb: 1.5s\nc: 10ms\nd: 5m\n", true},
		{"a: true\nb: False\nc: null\nd: ~\ne: yes\nf: on\ng: n\nh: True\ni: TRUE\nj: FALSE\nk: Null\nl: NULL\nm: nULL\n", true},
		{"a:\nb: x\n", true},
		{"a: {}\nb: []\n", true},
		{"a: '@type'\n'@b': 'it''s'\n\"c\": \"q\\\"\\n\\u00e9\\x41\"\n", true},
		{"a:\n- x\n- y: 1\n  z: 2\n- - nested\n", false},
		{"a:\n- x\n- y: 1\n  z: 2\nb: c\n", true},
		{"a:\n  - x\n  - 2\n", true},
		{"a:\n  b:\n    c: d\n  e: f\n", true},
		{"a: b\n  c: d\n", false},     // a continuation line
		{"a: b # c\n", false},         // a comment
		{"a: |\n  text\n", false},     // a block scalar
		{"a: &x b\nc: *x\n", false},   // anchors
		{"a: !!str 1\n", false},       // a tag
		{"a: [1, 2]\n", false},        // flow
		{"a: b\na: c\n", false},       // a duplicate key
		{"1: a\n", false},             // a key that is not a string
		{"true: a\n", false},          // nor is this
		{"<<: {}\n", false},           // a merge
		{"---\na: b\n", false},        // a document marker
		{"a: 'unterminated\n", false}, // a quoted scalar over lines
		{"a: \"bad \\q\"\n", false},   // an escape outside the subset
		{"a:\tb\n", false},            // a tab
		{"a: b\r\n", false},           // CR
		{"- a\n", false},              // not a mapping
		{"a: http://x:1/y\n", true},   // colons without a space
		{"a: 2001-12-14\n", false},    // a timestamp
		{"a: 0x1F\n", false},          // hex
		{"a: 0b101\n", false},         // binary
		{"a: -0b1\n", false},
		{"a: 0b+1\n", false},                              // yaml.v3 reads the sign after the prefix
		{"a: 0b" + strings.Repeat("1", 64) + "\n", false}, // a uint64
		{"a: 0o17\n", false},                              // octal
		{"a: -0o7\n", false},
		{"a: 0b3f9e1c2d/1.33.0/Clean/RELEASE/BoringSSL\n", true}, // a build hash
		{"a: 0b12\n", true},
		{"a: 0b\n", true},
		{"a: 0o8\n", true},
		{"a: 0oz\n", true},
		{"a: 1_000\n", false}, // underscores
		{"a: .inf\n", false},  // a float
		{"a: b:\n", false},    // a value ending like a key
		{"a: 123456789012345678901\n", false},
		{"  a: b\n", false}, // indented top level
		{"a:\n  - b\n  c: d\n", false},
		{"a: \u009a\n", false},   // a C1 control character
		{"a: \u0085b\n", false},  // NEL, a line break to YAML
		{"a: b\u2028c\n", false}, // LS
		{"a: \ufeffb\n", false},  // a byte order mark
		{"a: \xff\n", false},     // not UTF-8
		{"a: ü, 東京\n", true},
	} {
		if got := agreesWithYAMLv3(t, []byte(tc.doc)); got != tc.accept {
			t.Errorf("fast path accepted=%v, want %v, for\n%s", got, tc.accept, tc.doc)
		}
	}
}

// Documents written as the control plane writes them (random JSON values
// through sigs.k8s.io/yaml) are read as yaml.v3 reads them.
func TestBlockYAMLOnGeneratedDocuments(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	accepted := 0
	for i := 0; i < 2000; i++ {
		v := object{}
		for k := 0; k < 1+rng.IntN(5); k++ {
			v[randomKey(rng)] = randomValue(rng, 4)
		}
		js, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := sigsyaml.JSONToYAML(js)
		if err != nil {
			t.Fatal(err)
		}
		if agreesWithYAMLv3(t, doc) {
			accepted++
		}
	}
	// Most must take the fast path, or it saves nothing.
	if accepted < 1000 {
		t.Errorf("the fast path took %d of 2000 generated documents", accepted)
	}
}

var randomWords = []string{"a", "name", "typedConfig", "@type", "type.googleapis.com/envoy.x.v3.Y", "0s", "1.5s",
	"true", "null", "yes", "9901", "-1", "127.0.0.1", "http://cp:5678", "a b", "a: b", "a #b", "it's", "\"q\"",
	"ü", "", " x", "x ", "-", "- x", "[x]", "{}", "|", "*", "&", "!", "%", "`", "1e3", "0x10", ".5", "~", "::", "a\nb", "tab\there"}

func randomKey(rng *rand.Rand) string { return randomWords[rng.IntN(len(randomWords))] }

func randomValue(rng *rand.Rand, depth int) any {
	switch n := rng.IntN(8); {
	case depth > 0 && n == 0:
		m := map[string]any{}
		for k := 0; k < rng.IntN(4); k++ {
			m[randomKey(rng)] = randomValue(rng, depth-1)
		}
		return m
	case depth > 0 && n == 1:
		var s []any
		for k := 0; k < rng.IntN(4); k++ {
			s = append(s, randomValue(rng, depth-1))
		}
		return s
	case n == 2:
		return rng.IntN(100000) - 50000
	case n == 3:
		return rng.IntN(2) == 0
	case n == 4:
		return nil
	default:
		return strings.Repeat(randomKey(rng), 1+rng.IntN(2))
	}
}

func FuzzBlockYAML(f *testing.F) {
	for _, s := range []string{"a: b\n", "a:\n- x\n- y: 1\n  z: 2\n", "a: '@t'\nb: \"\\u00e9\"\n", "a: {}\nb: 0s\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		agreesWithYAMLv3(t, doc)
	})
}

func TestYAMLFloatAgreesWithItsExpression(t *testing.T) {
	re := regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
	for _, s := range []string{"", "+", "-", ".", "1", "1.", "1.5", ".5", "-.5", "1e", "1e5", "1e+5", "1E-5", "1.5e", "1.e3",
		".e3", "e3", "1e5x", "1..5", "+1.5", "--1", "0x1p3", "1_0", "127.0.0.1"} {
		if got, want := yamlFloat(s), re.MatchString(s); got != want {
			t.Errorf("yamlFloat(%q) = %v, the expression says %v", s, got, want)
		}
	}
}

// BenchmarkRewrite is what every start pays between the control plane's
// answer and Envoy's launch, on the control plane's egress bootstrap.
func BenchmarkRewrite(b *testing.B) {
	doc := fetchBootstrap(b, config.RoleEgress).yaml
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Rewrite(doc, "/run/zoneproxy/zoneproxy-xds.sock"); err != nil {
			b.Fatal(err)
		}
	}
}
