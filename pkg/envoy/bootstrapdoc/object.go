package bootstrapdoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Object is a JSON object whose members are kept as written, in order.
// Fields are named by their proto name (snake_case); a member spelled with
// the JSON name (camelCase, as kuma-cp writes it) matches too, as Envoy
// takes either.
type Object struct {
	members []Member
}

// Member is one member of an Object, its value as JSON.
type Member struct {
	Name string
	Raw  json.RawMessage
}

// ParseObject splits a JSON object into its members, order and values as
// written.
func ParseObject(js []byte) (*Object, error) {
	o := &Object{}
	err := eachMember(js, func(name string, raw json.RawMessage) bool {
		o.members = append(o.members, Member{Name: name, Raw: raw})
		return true
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// eachMember gives visit the members of the JSON object js in order, until
// visit returns false; the whole object is checked only if it does not.
func eachMember(js []byte, visit func(name string, raw json.RawMessage) bool) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if !visit(t.(string), raw) {
			return nil
		}
	}
	_, err := dec.Token()
	return err
}

// Members are the object's members in order.
func (o *Object) Members() []Member {
	if o == nil {
		return nil
	}
	return o.members
}

// Raw is field's value, nil if it is absent or null.
func (o *Object) Raw(field string) json.RawMessage {
	if i := o.index(field); i >= 0 {
		return nullAsAbsent(o.members[i].Raw)
	}
	return nil
}

// Object is field's value if it is an object, nil otherwise.
func (o *Object) Object(field string) *Object {
	return objectOrNil(o.Raw(field))
}

// List is field's value if it is an array, nil otherwise.
func (o *Object) List(field string) []json.RawMessage {
	var l []json.RawMessage
	if raw := o.Raw(field); raw != nil && json.Unmarshal(raw, &l) != nil {
		return nil
	}
	return l
}

// ObjectsIn are the objects in field's array, skipping anything else.
func (o *Object) ObjectsIn(field string) []*Object {
	var objs []*Object
	for _, raw := range o.List(field) {
		if c := objectOrNil(raw); c != nil {
			objs = append(objs, c)
		}
	}
	return objs
}

// String is field's value if it is a string, "" otherwise.
func (o *Object) String(field string) string {
	var s string
	if raw := o.Raw(field); raw != nil && json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// Decode reads field into m, refusing what m does not know: for a section
// that is written back, where dropping a field would lose it. It reports
// whether the field is there.
func (o *Object) Decode(field string, m proto.Message) (bool, error) {
	return o.decode(field, m, Unmarshal)
}

// DecodeKnown reads field into m, skipping fields m does not know: for a
// section that is only read.
func (o *Object) DecodeKnown(field string, m proto.Message) (bool, error) {
	return o.decode(field, m, UnmarshalKnown)
}

func (o *Object) decode(field string, m proto.Message, unmarshal func([]byte, proto.Message) error) (bool, error) {
	raw := o.Raw(field)
	if raw == nil {
		return false, nil
	}
	if err := unmarshal(raw, m); err != nil {
		return true, fmt.Errorf("%s: %w", field, err)
	}
	return true, nil
}

// Set makes raw field's value, under the spelling the object uses for it;
// a new member is inserted by name (JSON name), as Parse sorts them.
func (o *Object) Set(field string, raw json.RawMessage) {
	if i := o.index(field); i >= 0 {
		o.members[i].Raw = raw
		return
	}
	name := jsonName(field)
	i := sort.Search(len(o.members), func(i int) bool { return o.members[i].Name >= name })
	o.members = append(o.members, Member{})
	copy(o.members[i+1:], o.members[i:])
	o.members[i] = Member{Name: name, Raw: raw}
}

// SetProto writes m as field's value.
func (o *Object) SetProto(field string, m proto.Message) error {
	raw, err := Marshal(m)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	o.Set(field, raw)
	return nil
}

// Delete removes field, if it is there.
func (o *Object) Delete(field string) {
	if i := o.index(field); i >= 0 {
		o.members = append(o.members[:i], o.members[i+1:]...)
	}
}

// JSON writes the object compactly (members as they are held).
func (o *Object) JSON() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o.Members() {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(m.Name) // a string always marshals
		b.Write(name)
		b.WriteByte(':')
		b.Write(m.Raw)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func (o *Object) index(field string) int {
	if o == nil {
		return -1
	}
	jsonField := jsonName(field)
	for i, m := range o.members {
		if m.Name == field || m.Name == jsonField {
			return i
		}
	}
	return -1
}

// Unmarshal reads a section into m with protojson, refusing unknown fields
// and typed_config types this build does not link.
func Unmarshal(raw []byte, m proto.Message) error {
	return protojson.Unmarshal(raw, m)
}

// UnmarshalKnown reads a section into m, skipping unknown fields.
func UnmarshalKnown(raw []byte, m proto.Message) error {
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(raw, m)
}

// Marshal writes m as compact protojson (camelCase, as kuma-cp writes it).
func Marshal(m proto.Message) (json.RawMessage, error) {
	js, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	// protojson varies its spacing on purpose; the file is compared and
	// cached as bytes.
	var out bytes.Buffer
	if err := json.Compact(&out, js); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// jsonName is protojson's name for a proto field: lowerCamelCase.
func jsonName(field string) string {
	if !strings.Contains(field, "_") {
		return field
	}
	var b strings.Builder
	upper := false
	for _, r := range field {
		switch {
		case r == '_':
			upper = true
		case upper && 'a' <= r && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
			upper = false
		default:
			b.WriteRune(r)
			upper = false
		}
	}
	return b.String()
}

func objectOrNil(raw json.RawMessage) *Object {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	o, err := ParseObject(raw)
	if err != nil {
		return nil
	}
	return o
}

func nullAsAbsent(raw json.RawMessage) json.RawMessage {
	if string(raw) == "null" {
		return nil
	}
	return raw
}
