package bootstraprewrite

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode"

	yaml "go.yaml.in/yaml/v3"
)

// The bootstrap is handled as generic values so that the product does not
// link Envoy's config protos. Envoy accepts camelCase and snake_case keys
// alike; the control plane writes camelCase.

type object = map[string]any

// parse reads the control plane's YAML in one pass with yaml.v3 (linked
// for the config file already). Quoted scalars stay strings, and so do
// plain ones that yaml.v3 does not resolve to a number, bool or null (an
// Envoy build hash starting 0b or 0o, 1.5s, 127.0.0.1); render writes them
// as JSON strings.
func parse(doc []byte) (object, error) {
	var root any
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	m, ok := stringKeys(root).(object)
	if !ok {
		return nil, fmt.Errorf("not a YAML mapping")
	}
	return m, nil
}

// stringKeys turns mappings with non-string keys (YAML allows 1: x) into
// string-keyed objects, as JSON has them.
func stringKeys(v any) any {
	switch t := v.(type) {
	case map[any]any:
		m := make(object, len(t))
		for k, c := range t {
			m[fmt.Sprint(k)] = stringKeys(c)
		}
		return m
	case object:
		for k, c := range t {
			t[k] = stringKeys(c)
		}
	case []any:
		for i, c := range t {
			t[i] = stringKeys(c)
		}
	}
	return v
}

// render writes JSON, which is YAML too: Envoy parses the file by its
// .yaml name with its YAML parser, and JSON is far cheaper to write.
func render(m object) ([]byte, error) {
	js, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(js, '\n'), nil
}

// snakes remembers snake(camel) for the field names the code looks up, a
// few dozen constants: walk asks for two of them at every object.
var snakes sync.Map

func snakeOf(camel string) string {
	if s, ok := snakes.Load(camel); ok {
		return s.(string)
	}
	s := snake(camel)
	snakes.Store(camel, s)
	return s
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
	if s := snakeOf(camel); s != camel {
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
