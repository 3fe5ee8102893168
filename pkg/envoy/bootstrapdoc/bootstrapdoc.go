// Package bootstrapdoc reads and writes Envoy's bootstrap in sections: its
// top level is an Object whose members stay JSON as they came, and the
// sections zoneproxy reads or rewrites are decoded into go-control-plane's
// protos (protojson) where the binary links them already (core, TLS). The
// full Bootstrap type is not used: linking it costs more than the start-up
// and memory budgets allow (docs/benchmarks.md, "A simpler house"). So
// nothing zoneproxy does not understand is lost or reinterpreted.
package bootstrapdoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	yaml "go.yaml.in/yaml/v3"
)

// Parse reads a whole bootstrap, YAML or JSON, in one pass with yaml.v3
// (linked for the config file already). Each member is written back as
// encoding/json writes the tree: compact, keys sorted. Quoted scalars stay
// strings, and so do plain ones that yaml.v3 does not resolve to a number,
// bool or null (an Envoy build hash starting 0b or 0o, 1.5s, 127.0.0.1).
func Parse(doc []byte) (*Object, error) {
	var root any
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	top, ok := stringKeys(root).(map[string]any)
	if !ok {
		return nil, errors.New("not a YAML mapping")
	}
	o := &Object{members: make([]Member, 0, len(top))}
	for _, name := range slices.Sorted(maps.Keys(top)) {
		raw, err := json.Marshal(top[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		o.members = append(o.members, Member{Name: name, Raw: raw})
	}
	return o, nil
}

// Section is the top-level member field of doc as JSON, nil if there is
// none. A JSON object (as zoneproxy writes the bootstrap, "admin" first)
// is read only up to that member.
func Section(doc []byte, field string) (json.RawMessage, error) {
	if d := bytes.TrimSpace(doc); len(d) > 0 && d[0] == '{' {
		if raw, err := memberOfJSON(d, field); err == nil {
			return raw, nil
		}
	}
	o, err := Parse(doc)
	if err != nil {
		return nil, err
	}
	return o.Raw(field), nil
}

func memberOfJSON(d []byte, field string) (json.RawMessage, error) {
	jsonField := jsonName(field)
	var found json.RawMessage
	err := eachMember(d, func(name string, raw json.RawMessage) bool {
		if name == field || name == jsonField {
			found = nullAsAbsent(raw)
			return false
		}
		return true
	})
	return found, err
}

// stringKeys turns mappings with non-string keys (YAML allows 1: x) into
// string-keyed objects, as JSON has them.
func stringKeys(v any) any {
	switch t := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, c := range t {
			m[fmt.Sprint(k)] = stringKeys(c)
		}
		return m
	case map[string]any:
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
