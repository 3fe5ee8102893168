package main

import (
	"fmt"
	"strings"

	udpaannotations "github.com/cncf/xds/go/udpa/annotations"
	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// typeResolver knows every message linked in by zz_types.go.
var typeResolver = protoregistry.GlobalTypes

// Envoy knows these, but their Go packages need modules outside go.mod
// (OpenTelemetry protos); they are accepted without looking inside.
var opaqueTypes = map[string]bool{
	"envoy.extensions.access_loggers.open_telemetry.v3.OpenTelemetryAccessLogConfig": true,
	"envoy.extensions.stat_sinks.open_telemetry.v3.SinkConfig":                       true,
	"envoy.service.metrics.v3.StreamMetricsMessage":                                  true,
}

type allValidator interface{ ValidateAll() error }

// validateDeep runs the PGV rules of m and of every message packed in an Any
// below it, the way Envoy validates each extension config it instantiates.
func validateDeep(m proto.Message) error {
	return (&deepValidator{}).message(m)
}

type deepValidator struct {
	rejectUnknown bool
	// warnUnknown, when set, is told about unknown fields that are let through.
	warnUnknown func(typeName string)
}

func (v *deepValidator) message(m proto.Message) error {
	if val, ok := m.(allValidator); ok {
		if err := val.ValidateAll(); err != nil {
			return fmt.Errorf("Proto constraint validation failed (%s)", oneLine(err.Error()))
		}
	}
	return v.walk(m.ProtoReflect())
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

func (v *deepValidator) walk(m protoreflect.Message) error {
	if len(m.GetUnknown()) > 0 {
		if v.rejectUnknown {
			return fmt.Errorf("Protobuf message (type %s with unknown field set {...}) has unknown fields", m.Descriptor().FullName())
		}
		if v.warnUnknown != nil {
			v.warnUnknown(string(m.Descriptor().FullName()))
		}
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
		// Typed metadata may carry any type; Envoy never instantiates it.
		if fd.Name() == "typed_filter_metadata" {
			return true
		}
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() == nil {
				return true
			}
			val.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				err = v.visit(mv.Message(), m)
				return err == nil
			})
		case fd.IsList():
			if fd.Message() == nil {
				return true
			}
			l := val.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = v.visit(l.Get(i).Message(), m)
			}
		case fd.Message() != nil:
			err = v.visit(val.Message(), m)
		}
		return err == nil
	})
	return err
}

func (v *deepValidator) visit(msg, parent protoreflect.Message) error {
	if msg.Descriptor().FullName() != "google.protobuf.Any" {
		return v.walk(msg)
	}
	a, ok := msg.Interface().(*anypb.Any)
	if !ok {
		return nil
	}
	inner, err := unpackAny(a)
	if err != nil {
		if name := extensionName(parent); name != "" && strings.HasPrefix(err.Error(), "Didn't find") {
			return fmt.Errorf("Didn't find a registered implementation for '%s' with type URL: '%s'", name, typeName(a.GetTypeUrl()))
		}
		return err
	}
	if inner == nil {
		return nil
	}
	return v.message(inner)
}

func extensionName(m protoreflect.Message) string {
	fd := m.Descriptor().Fields().ByName("name")
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() {
		return ""
	}
	return m.Get(fd).String()
}

func typeName(url string) string { return url[strings.LastIndex(url, "/")+1:] }

// unpackAny resolves an Any (and a TypedStruct inside it) to its message. It
// returns nil, nil for the opaque types.
func unpackAny(a *anypb.Any) (proto.Message, error) {
	if a == nil {
		return nil, nil
	}
	name := typeName(a.GetTypeUrl())
	if opaqueTypes[name] {
		return nil, nil
	}
	mt, err := typeResolver.FindMessageByURL(a.GetTypeUrl())
	if err != nil {
		return nil, fmt.Errorf("Didn't find a registered implementation for type URL: '%s'", name)
	}
	m := mt.New().Interface()
	if err := (proto.UnmarshalOptions{Resolver: typeResolver}).Unmarshal(a.GetValue(), m); err != nil {
		return nil, fmt.Errorf("Unable to unpack as %s: %s", name, trimProtoErr(err))
	}
	var tsURL string
	var tsValue *structpb.Struct
	switch ts := m.(type) {
	case *xdstypev3.TypedStruct:
		tsURL, tsValue = ts.GetTypeUrl(), ts.GetValue()
	case *udpatypev1.TypedStruct:
		tsURL, tsValue = ts.GetTypeUrl(), ts.GetValue()
	default:
		return m, nil
	}
	imt, err := typeResolver.FindMessageByURL(tsURL)
	if err != nil {
		return nil, fmt.Errorf("Didn't find a registered implementation for type URL: '%s'", typeName(tsURL))
	}
	inner := imt.New().Interface()
	if tsValue != nil {
		j, err := protojson.Marshal(tsValue)
		if err != nil {
			return nil, err
		}
		if err := (protojson.UnmarshalOptions{Resolver: typeResolver}).Unmarshal(j, inner); err != nil {
			return nil, fmt.Errorf("Unable to parse JSON as proto (INVALID_ARGUMENT:%s)", trimProtoErr(err))
		}
	}
	return inner, nil
}

const redacted = "[redacted]"

// redact replaces fields annotated (udpa.annotations.sensitive) as Envoy does
// before serving a config dump; Any payloads are redacted too.
func redact(m proto.Message) proto.Message {
	c := proto.Clone(m)
	redactMsg(c.ProtoReflect(), false)
	return c
}

func redactMsg(m protoreflect.Message, all bool) {
	if m.Descriptor().FullName() == "google.protobuf.Any" {
		a, ok := m.Interface().(*anypb.Any)
		if !ok {
			return
		}
		inner, err := unpackAny(a)
		if err != nil || inner == nil {
			return
		}
		redactMsg(inner.ProtoReflect(), all)
		if b, err := (proto.MarshalOptions{Deterministic: true}).Marshal(inner); err == nil {
			a.Value = b
		}
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
		sensitive := all
		if opts := fd.Options(); opts != nil {
			if s, ok := proto.GetExtension(opts, udpaannotations.E_Sensitive).(bool); ok && s {
				sensitive = true
			}
		}
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				val.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					redactMsg(mv.Message(), sensitive)
					return true
				})
			} else if sensitive && fd.MapValue().Kind() == protoreflect.StringKind {
				mp := m.Mutable(fd).Map()
				mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
					mp.Set(k, protoreflect.ValueOfString(redacted))
					return true
				})
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for i := 0; i < l.Len(); i++ {
				switch {
				case fd.Message() != nil:
					redactMsg(l.Get(i).Message(), sensitive)
				case sensitive && fd.Kind() == protoreflect.StringKind:
					l.Set(i, protoreflect.ValueOfString(redacted))
				case sensitive && fd.Kind() == protoreflect.BytesKind:
					l.Set(i, protoreflect.ValueOfBytes([]byte(redacted)))
				}
			}
		case fd.Message() != nil:
			redactMsg(m.Mutable(fd).Message(), sensitive)
		case sensitive && fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString(redacted))
		case sensitive && fd.Kind() == protoreflect.BytesKind:
			m.Set(fd, protoreflect.ValueOfBytes([]byte(redacted)))
		}
		return true
	})
}
