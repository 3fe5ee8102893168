package xdsrelay

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/zoneproxy/zoneproxy/pkg/lkgcache"
)

// Envoy's requests are read, and the cache's answers written, on the wire:
// go-control-plane's discovery types would link Envoy's core config protos
// (the Node), costing 3 MiB of binary and 3 MiB of RSS at start-up for the
// dozen fields the relay uses. The tests check both against those types.

// Field numbers of envoy.service.discovery.v3 requests and google.rpc.Status.
const (
	deltaReqType        = 2
	deltaReqSubscribe   = 3
	deltaReqUnsubscribe = 4
	deltaReqInitial     = 5 // map<string, string>: entries {1: key, 2: value}
	deltaReqNonce       = 6
	deltaReqError       = 7

	sotwReqVersion = 1
	sotwReqNames   = 3
	sotwReqType    = 4
	sotwReqNonce   = 5
	sotwReqError   = 6

	statusMessage = 2
)

// request is what the relay reads of one of Envoy's requests.
type request struct {
	typeURL     string
	nonce       string
	nack        bool
	errMsg      string
	subscribe   []string // delta: subscribed; SotW: the names asked for
	unsubscribe []string
	initial     map[string]string // delta: versions Envoy holds
}

func scanDeltaRequest(b []byte) (*request, error) {
	r := &request{}
	err := scan(b, func(num protowire.Number, raw []byte) error {
		switch num {
		case deltaReqType:
			r.typeURL = string(raw)
		case deltaReqSubscribe:
			r.subscribe = append(r.subscribe, string(raw))
		case deltaReqUnsubscribe:
			r.unsubscribe = append(r.unsubscribe, string(raw))
		case deltaReqNonce:
			r.nonce = string(raw)
		case deltaReqError:
			r.nack = true
			msg, err := stringField(raw, statusMessage)
			r.errMsg = msg
			return err
		case deltaReqInitial:
			var k, v string
			if err := scan(raw, func(num protowire.Number, raw []byte) error {
				switch num {
				case 1:
					k = string(raw)
				case 2:
					v = string(raw)
				}
				return nil
			}); err != nil {
				return err
			}
			if r.initial == nil {
				r.initial = map[string]string{}
			}
			r.initial[k] = v
		}
		return nil
	})
	return r, err
}

func scanSotwRequest(b []byte) (*request, error) {
	r := &request{}
	err := scan(b, func(num protowire.Number, raw []byte) error {
		switch num {
		case sotwReqType:
			r.typeURL = string(raw)
		case sotwReqNames:
			r.subscribe = append(r.subscribe, string(raw))
		case sotwReqNonce:
			r.nonce = string(raw)
		case sotwReqError:
			r.nack = true
			msg, err := stringField(raw, statusMessage)
			r.errMsg = msg
			return err
		}
		return nil
	})
	return r, err
}

// appendAny writes an Any of r's body as field num.
func appendAny(b []byte, num protowire.Number, r lkgcache.Resource) []byte {
	var a []byte
	a = appendStr(a, anyTypeURL, r.TypeURL)
	a = appendRaw(a, anyValue, r.Body)
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, a)
}

func appendStr(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendRaw(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// deltaResponseBytes is a DeltaDiscoveryResponse from cached resources.
func deltaResponseBytes(typeURL, version, nonce string, res []lkgcache.Resource, removed []string) []byte {
	var b []byte
	b = appendStr(b, deltaRespVersion, version)
	for _, r := range res {
		var rb []byte
		rb = appendStr(rb, resourceVersion, r.Version)
		rb = appendAny(rb, resourceAny, r)
		rb = appendStr(rb, resourceName, r.Name)
		b = protowire.AppendTag(b, deltaRespResource, protowire.BytesType)
		b = protowire.AppendBytes(b, rb)
	}
	b = appendStr(b, deltaRespType, typeURL)
	b = appendStr(b, deltaRespNonce, nonce)
	for _, n := range removed {
		b = protowire.AppendTag(b, deltaRespRemoved, protowire.BytesType)
		b = protowire.AppendString(b, n)
	}
	return b
}

// sotwResponseBytes is a DiscoveryResponse from cached resources.
func sotwResponseBytes(typeURL, version, nonce string, res []lkgcache.Resource) []byte {
	var b []byte
	b = appendStr(b, sotwRespVersion, version)
	for _, r := range res {
		b = appendAny(b, sotwRespResource, r)
	}
	b = appendStr(b, sotwRespType, typeURL)
	return appendStr(b, sotwRespNonce, nonce)
}
