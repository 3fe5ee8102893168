package bootstraprewrite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"sigs.k8s.io/yaml"
)

// The bootstrap is handled as generic JSON values so that the product does
// not link Envoy's config protos. Envoy accepts camelCase and snake_case
// keys alike; the control plane writes camelCase.

type object = map[string]any

func parse(doc []byte) (object, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber() // keep 4294967295 and friends exactly as written
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("not a YAML mapping: %w", err)
	}
	m, ok := root.(object)
	if !ok {
		return nil, fmt.Errorf("not a YAML mapping")
	}
	return m, nil
}

func render(m object) ([]byte, error) {
	js, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(js)
}

func snake(camel string) string {
	var b strings.Builder
	for _, r := range camel {
		if unicode.IsUpper(r) {
			b.WriteByte('_')
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// key is the spelling of field camel used in m (camel if absent).
func key(m object, camel string) string {
	if _, ok := m[camel]; ok {
		return camel
	}
	if s := snake(camel); s != camel {
		if _, ok := m[s]; ok {
			return s
		}
	}
	return camel
}

func get(m object, camel string) any { return m[key(m, camel)] }

func del(m object, camel string) { delete(m, key(m, camel)) }

// obj follows a path of camelCase fields through nested objects.
func obj(m object, path ...string) object {
	cur := m
	for _, p := range path {
		next, ok := get(cur, p).(object)
		if !ok {
			return nil
		}
		cur = next
	}
	return cur
}

func list(m object, camel string) []any {
	l, _ := get(m, camel).([]any)
	return l
}

func str(m object, camel string) string {
	s, _ := get(m, camel).(string)
	return s
}

// walk visits every object below v, parents first.
func walk(v any, visit func(object)) {
	switch t := v.(type) {
	case object:
		visit(t)
		for _, c := range t {
			walk(c, visit)
		}
	case []any:
		for _, c := range t {
			walk(c, visit)
		}
	}
}
