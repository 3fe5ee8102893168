package xdsrelay

import (
	"fmt"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/zoneproxy/zoneproxy/pkg/lkgcache"
)

// Responses are scanned on the wire rather than unmarshalled: a 1 MB
// snapshot would otherwise cost a thousand messages and a copy of every
// resource per response. Resources (bodies, names, versions) alias the
// received frame, which nothing writes to.

// Field numbers of envoy.service.discovery.v3 messages.
const (
	deltaRespVersion      = 1 // DeltaDiscoveryResponse.system_version_info
	deltaRespResource     = 2
	deltaRespType         = 4
	deltaRespNonce        = 5
	deltaRespRemoved      = 6
	deltaRespRemovedNames = 8

	sotwRespVersion  = 1 // DiscoveryResponse.version_info
	sotwRespResource = 2
	sotwRespType     = 4
	sotwRespNonce    = 5

	resourceVersion = 1 // Resource
	resourceAny     = 2
	resourceName    = 3
	resourceNameMsg = 8

	anyTypeURL = 1
	anyValue   = 2

	resourceNameName = 1 // ResourceName.name
)

// scanDeltaResponse reads what the relay tracks of a delta response.
func scanDeltaResponse(b []byte) (p *pendingResponse, nonce string, err error) {
	p = &pendingResponse{resources: make([]lkgcache.Resource, 0, count(b, deltaRespResource))}
	err = scan(b, func(num protowire.Number, raw []byte) error {
		switch num {
		case deltaRespVersion:
			p.version = string(raw)
		case deltaRespType:
			p.typeURL = string(raw)
		case deltaRespNonce:
			nonce = string(raw)
		case deltaRespRemoved:
			p.removed = append(p.removed, string(raw))
		case deltaRespRemovedNames:
			name, err := stringField(raw, resourceNameName)
			if err != nil {
				return err
			}
			p.removed = append(p.removed, name)
		case deltaRespResource:
			r, ok, err := scanResource(raw)
			if err != nil {
				return err
			}
			if ok {
				p.resources = append(p.resources, r)
			}
		}
		return nil
	})
	return p, nonce, err
}

// scanResource reads a discovery Resource; ok is false for a name-only
// entry (no body).
func scanResource(b []byte) (r lkgcache.Resource, ok bool, err error) {
	var nameMsg []byte
	err = scan(b, func(num protowire.Number, raw []byte) error {
		switch num {
		case resourceName:
			r.Name = alias(raw)
		case resourceNameMsg:
			nameMsg = raw
		case resourceVersion:
			r.Version = alias(raw)
		case resourceAny:
			ok = true
			return scan(raw, func(num protowire.Number, raw []byte) error {
				switch num {
				case anyTypeURL:
					r.TypeURL = alias(raw)
				case anyValue:
					r.Body = raw
				}
				return nil
			})
		}
		return nil
	})
	if err == nil && r.Name == "" && nameMsg != nil {
		r.Name, err = stringField(nameMsg, resourceNameName)
	}
	return r, ok, err
}

// scanSotwResponse reads what the relay tracks of a state-of-the-world
// response.
func scanSotwResponse(b []byte) (p *pendingResponse, nonce string, err error) {
	p = &pendingResponse{replace: true, resources: make([]lkgcache.Resource, 0, count(b, sotwRespResource))}
	err = scan(b, func(num protowire.Number, raw []byte) error {
		switch num {
		case sotwRespVersion:
			p.version = string(raw)
		case sotwRespType:
			p.typeURL = string(raw)
		case sotwRespNonce:
			nonce = string(raw)
		case sotwRespResource:
			var typeURL string
			var value []byte
			if err := scan(raw, func(num protowire.Number, raw []byte) error {
				switch num {
				case anyTypeURL:
					typeURL = alias(raw)
				case anyValue:
					value = raw
				}
				return nil
			}); err != nil {
				return err
			}
			r, err := sotwResource(typeURL, value)
			if err != nil {
				return err
			}
			p.resources = append(p.resources, r)
		}
		return nil
	})
	return p, nonce, err
}

const resourceWrapperType = "type.googleapis.com/envoy.service.discovery.v3.Resource"

// sotwResource names a resource: unwrapped from a discovery Resource, or
// by field 1, which is the name in every xDS resource type (Listener,
// Cluster, ClusterLoadAssignment.cluster_name, RouteConfiguration, Secret…).
func sotwResource(typeURL string, value []byte) (lkgcache.Resource, error) {
	if typeURL == resourceWrapperType {
		r, ok, err := scanResource(value)
		if err != nil || ok {
			return r, err
		}
	}
	var name string
	err := scan(value, func(n protowire.Number, raw []byte) error {
		if n == 1 {
			name = alias(raw)
		}
		return nil
	})
	return lkgcache.Resource{Name: name, TypeURL: typeURL, Body: value}, err
}

// alias is raw as a string without a copy: raw is part of a frame that is
// never written to, and a thousand names a response are not re-allocated.
func alias(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	return unsafe.String(&raw[0], len(raw))
}

// count is how many times field num occurs in msg, to size slices once; a
// malformed msg counts what precedes the damage (scan reports it).
func count(msg []byte, num protowire.Number) int {
	n := 0
	for len(msg) > 0 {
		f, typ, t := protowire.ConsumeTag(msg)
		if t < 0 {
			return n
		}
		m := protowire.ConsumeFieldValue(f, typ, msg[t:])
		if m < 0 {
			return n
		}
		if f == num {
			n++
		}
		msg = msg[t+m:]
	}
	return n
}

// stringField is the last length-delimited field num of msg.
func stringField(msg []byte, num protowire.Number) (string, error) {
	var out string
	err := scan(msg, func(n protowire.Number, raw []byte) error {
		if n == num {
			out = string(raw)
		}
		return nil
	})
	return out, err
}

// scan calls each for every length-delimited field of msg and skips the
// others.
func scan(msg []byte, each func(num protowire.Number, raw []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("malformed message: %w", protowire.ParseError(n))
		}
		msg = msg[n:]
		if typ == protowire.BytesType {
			raw, m := protowire.ConsumeBytes(msg)
			if m < 0 {
				return fmt.Errorf("malformed field %d: %w", num, protowire.ParseError(m))
			}
			if err := each(num, raw); err != nil {
				return err
			}
			msg = msg[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, msg)
		if m < 0 {
			return fmt.Errorf("malformed field %d: %w", num, protowire.ParseError(m))
		}
		msg = msg[m:]
	}
	return nil
}
