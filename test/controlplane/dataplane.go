package controlplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

const workloadLabel = "kuma.io/workload"

// Listener types of Dataplane.networking.listeners[].type.
const (
	listenerUnspecified int32 = 0
	listenerZoneIngress int32 = 1
	listenerZoneEgress  int32 = 2
)

// Listener states of Dataplane.networking.listeners[].state.
const (
	listenerReady    int32 = 0
	listenerNotReady int32 = 1
)

var listenerTypeValues = map[string]int32{"Unspecified": 0, "ZoneIngress": 1, "ZoneEgress": 2}
var listenerStateValues = map[string]int32{"Ready": 0, "NotReady": 1}
var inboundStateValues = map[string]int32{"Ready": 0, "NotReady": 1, "Ignored": 2}
var gatewayTypeValues = map[string]int32{"DELEGATED": 0, "BUILTIN": 1}

// dataplane is the subset of kuma's Dataplane resource the test CP needs.
type dataplane struct {
	Mesh       string
	Name       string
	Labels     map[string]string
	Networking *dpNetworking
}

type dpNetworking struct {
	Address   string
	AdminPort uint32
	Inbound   []dpInbound
	Outbound  []dpOutbound
	Gateway   *dpGateway
	Listeners []dpListener
}

type dpInbound struct {
	Port           uint32
	ServicePort    uint32
	ServiceAddress string
	Address        string
	Name           string
}

type dpOutbound struct {
	Address string
	Port    uint32
}

type dpGateway struct {
	Type int32
}

type dpListener struct {
	Type    int32
	Address string
	Port    uint32
	Name    string
	State   int32 // listenerReady (the zero value) or listenerNotReady
}

// sectionName is the listener's name, or its port when unnamed.
func (l dpListener) sectionName() string {
	if l.Name != "" {
		return l.Name
	}
	return strconv.FormatUint(uint64(l.Port), 10)
}

func (d *dataplane) workload() string { return d.Labels[workloadLabel] }

// parseDataplane reads a Dataplane in kuma's rest "flat" format (YAML or
// JSON). Errors mean the CP could not decode it (500 at /bootstrap).
func parseDataplane(data []byte) (*dataplane, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	var meta struct {
		Type             string            `json:"type"`
		Mesh             string            `json:"mesh"`
		Name             string            `json:"name"`
		Labels           map[string]string `json:"labels"`
		CreationTime     *time.Time        `json:"creationTime"`
		ModificationTime *time.Time        `json:"modificationTime"`
	}
	if err := json.Unmarshal(js, &meta); err != nil {
		return nil, fmt.Errorf("invalid meta type: %w", err)
	}
	switch meta.Type {
	case "Dataplane":
	case "":
		return nil, errors.New("invalid meta type: type cannot be empty")
	case "Mesh", "MeshService", "MeshExternalService", "MeshIdentity", "MeshZoneAddress", "MeshTrafficPermission":
		return nil, errors.New("invalid resource: not a Dataplane")
	default:
		return nil, fmt.Errorf("unknown type %q", meta.Type)
	}
	root, err := asObject(js)
	if err != nil {
		return nil, err
	}
	dp := &dataplane{Mesh: meta.Mesh, Name: meta.Name, Labels: meta.Labels}
	if dp.Labels == nil {
		dp.Labels = map[string]string{}
	}
	if raw, ok := root.field("networking"); ok {
		n, err := parseNetworking(raw)
		if err != nil {
			return nil, fmt.Errorf("invalid Dataplane object: %w", err)
		}
		dp.Networking = n
	}
	return dp, nil
}

func parseNetworking(raw json.RawMessage) (*dpNetworking, error) {
	o, err := asObject(raw)
	if err != nil || o == nil {
		return nil, err
	}
	n := &dpNetworking{}
	if n.Address, err = o.str("address"); err != nil {
		return nil, err
	}
	if _, err = o.str("advertisedAddress", "advertised_address"); err != nil {
		return nil, err
	}
	if raw, ok := o.field("admin"); ok {
		a, err := asObject(raw)
		if err != nil {
			return nil, err
		}
		if a != nil {
			if n.AdminPort, err = a.u32("port"); err != nil {
				return nil, err
			}
		}
	}
	if err := o.list("inbound", func(raw json.RawMessage) error {
		in, err := asObject(raw)
		if err != nil || in == nil {
			return errOr(err, "inbound: null element")
		}
		var ib dpInbound
		if ib.Port, err = in.u32("port"); err != nil {
			return err
		}
		if ib.ServicePort, err = in.u32("servicePort", "service_port"); err != nil {
			return err
		}
		if ib.ServiceAddress, err = in.str("serviceAddress", "service_address"); err != nil {
			return err
		}
		if ib.Address, err = in.str("address"); err != nil {
			return err
		}
		if ib.Name, err = in.str("name"); err != nil {
			return err
		}
		if err := in.strMap("tags"); err != nil {
			return err
		}
		if _, err := in.enum("state", inboundStateValues); err != nil {
			return err
		}
		n.Inbound = append(n.Inbound, ib)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := o.list("outbound", func(raw json.RawMessage) error {
		out, err := asObject(raw)
		if err != nil || out == nil {
			return errOr(err, "outbound: null element")
		}
		var ob dpOutbound
		if ob.Address, err = out.str("address"); err != nil {
			return err
		}
		if ob.Port, err = out.u32("port"); err != nil {
			return err
		}
		if err := out.strMap("tags"); err != nil {
			return err
		}
		n.Outbound = append(n.Outbound, ob)
		return nil
	}); err != nil {
		return nil, err
	}
	if raw, ok := o.field("gateway"); ok {
		g, err := asObject(raw)
		if err != nil {
			return nil, err
		}
		if g != nil {
			gw := &dpGateway{}
			if gw.Type, err = g.enum("type", gatewayTypeValues); err != nil {
				return nil, err
			}
			if err := g.strMap("tags"); err != nil {
				return nil, err
			}
			n.Gateway = gw
		}
	}
	if err := o.list("listeners", func(raw json.RawMessage) error {
		lo, err := asObject(raw)
		if err != nil || lo == nil {
			return errOr(err, "listeners: null element")
		}
		var l dpListener
		if l.Type, err = lo.enum("type", listenerTypeValues); err != nil {
			return fmt.Errorf("%w for enum kuma.mesh.v1alpha1.Dataplane.Networking.Listener.Type", err)
		}
		if l.Address, err = lo.str("address"); err != nil {
			return err
		}
		if l.Port, err = lo.u32("port"); err != nil {
			return err
		}
		if l.Name, err = lo.str("name"); err != nil {
			return err
		}
		if l.State, err = lo.enum("state", listenerStateValues); err != nil {
			return err
		}
		n.Listeners = append(n.Listeners, l)
		return nil
	}); err != nil {
		return nil, err
	}
	return n, nil
}

func errOr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

// object decodes proto JSON the way protojson does for the fields used
// here: both JSON and proto field names, null as unset, unknown keys ignored.
type object map[string]json.RawMessage

func asObject(raw json.RawMessage) (object, error) {
	if isNull(raw) {
		return nil, nil
	}
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, fmt.Errorf("expected an object: %w", err)
	}
	return o, nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func (o object) field(names ...string) (json.RawMessage, bool) {
	for _, n := range names {
		if v, ok := o[n]; ok && !isNull(v) {
			return v, true
		}
	}
	return nil, false
}

func (o object) str(names ...string) (string, error) {
	raw, ok := o.field(names...)
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("invalid value for string field %s: %s", names[0], raw)
	}
	return s, nil
}

// u32 accepts a JSON number or a numeric string, as protojson does.
func (o object) u32(names ...string) (uint32, error) {
	raw, ok := o.field(names...)
	if !ok {
		return 0, nil
	}
	s := strings.TrimSpace(string(raw))
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > math.MaxUint32 || f != math.Trunc(f) {
		return 0, fmt.Errorf("invalid value for uint32 field %s: %s", names[0], raw)
	}
	return uint32(f), nil
}

func (o object) enum(name string, values map[string]int32) (int32, error) {
	raw, ok := o.field(name)
	if !ok {
		return 0, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		v, ok := values[s]
		if !ok {
			return 0, fmt.Errorf("invalid value for enum field %s: unknown value %q", name, string(raw))
		}
		return v, nil
	}
	var n int32
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("invalid value for enum field %s: %s", name, raw)
	}
	return n, nil
}

func (o object) strMap(name string) error {
	raw, ok := o.field(name)
	if !ok {
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("invalid value for map field %s: %w", name, err)
	}
	return nil
}

func (o object) list(name string, each func(json.RawMessage) error) error {
	raw, ok := o.field(name)
	if !ok {
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return fmt.Errorf("invalid value for repeated field %s: %w", name, err)
	}
	for _, it := range items {
		if err := each(it); err != nil {
			return err
		}
	}
	return nil
}
