package lkgcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The file is magic, a protobuf-wire body, and the SHA-256 of both: a torn
// or altered file fails the checksum before anything in it is trusted.
var magic = []byte("ZPXDSLKG")

const (
	formatVersion = 1
	sumSize       = sha256.Size
)

// Field numbers of the body.
const (
	fFormat    = 1
	fIdentity  = 2
	fWrittenAt = 3
	fBootstrap = 4
	fType      = 5
	fUpstream  = 6 // JSON of cpdial.Target

	fIDMesh = 1
	fIDName = 2
	fIDRole = 3
	fIDCP   = 4

	fTypeURL      = 1
	fTypeVersion  = 2
	fTypeResource = 3

	fResName    = 1
	fResVersion = 2
	fResType    = 3
	fResBody    = 4
)

// Encode serializes s (normalized first) into the cache file format, in
// one allocation: a snapshot is megabytes.
func Encode(s *Snapshot) []byte {
	s.normalize()
	up := upstreamJSON(s)
	body := bodySize(s, up)
	b := make([]byte, 0, len(magic)+body+sumSize)
	b = append(b, magic...)
	b = appendBody(b, s, up)
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

func identitySize(id Identity) int {
	return bytesSize(fIDMesh, len(id.Mesh)) + bytesSize(fIDName, len(id.Name)) +
		bytesSize(fIDRole, len(id.Role)) + bytesSize(fIDCP, len(id.ControlPlane))
}

func resourceSize(r Resource) int {
	return bytesSize(fResName, len(r.Name)) + bytesSize(fResVersion, len(r.Version)) +
		bytesSize(fResType, len(r.TypeURL)) + bytesSize(fResBody, len(r.Body))
}

func typeSize(t TypeState) int {
	n := bytesSize(fTypeURL, len(t.TypeURL)) + bytesSize(fTypeVersion, len(t.Version))
	for _, r := range t.Resources {
		n += bytesSize(fTypeResource, resourceSize(r))
	}
	return n
}

// upstreamJSON is field fUpstream, nil when there is no upstream.
func upstreamJSON(s *Snapshot) []byte {
	if reflect.ValueOf(s.Upstream).IsZero() {
		return nil
	}
	b, _ := json.Marshal(s.Upstream) // plain strings, bytes and ints cannot fail
	return b
}

func bodySize(s *Snapshot, up []byte) int {
	n := protowire.SizeTag(fFormat) + protowire.SizeVarint(formatVersion) +
		bytesSize(fIdentity, identitySize(s.Identity)) +
		protowire.SizeTag(fWrittenAt) + protowire.SizeVarint(uint64(s.WrittenAt.UnixNano())) +
		bytesSize(fBootstrap, len(s.Bootstrap))
	if up != nil {
		n += bytesSize(fUpstream, len(up))
	}
	for _, t := range s.Types {
		n += bytesSize(fType, typeSize(t))
	}
	return n
}

func bytesSize(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// appendBody writes nested messages in place, their lengths known ahead.
func appendBody(b []byte, s *Snapshot, up []byte) []byte {
	b = protowire.AppendTag(b, fFormat, protowire.VarintType)
	b = protowire.AppendVarint(b, formatVersion)
	b = appendHeader(b, fIdentity, identitySize(s.Identity))
	b = appendString(b, fIDMesh, s.Identity.Mesh)
	b = appendString(b, fIDName, s.Identity.Name)
	b = appendString(b, fIDRole, s.Identity.Role)
	b = appendString(b, fIDCP, s.Identity.ControlPlane)
	b = protowire.AppendTag(b, fWrittenAt, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(s.WrittenAt.UnixNano()))
	b = appendBytes(b, fBootstrap, s.Bootstrap)
	if up != nil {
		b = appendBytes(b, fUpstream, up)
	}
	for _, t := range s.Types {
		b = appendHeader(b, fType, typeSize(t))
		b = appendString(b, fTypeURL, t.TypeURL)
		b = appendString(b, fTypeVersion, t.Version)
		for _, r := range t.Resources {
			b = appendHeader(b, fTypeResource, resourceSize(r))
			b = appendString(b, fResName, r.Name)
			b = appendString(b, fResVersion, r.Version)
			b = appendString(b, fResType, r.TypeURL)
			b = appendBytes(b, fResBody, r.Body)
		}
	}
	return b
}

// appendHeader starts a length-delimited field of n bytes.
func appendHeader(b []byte, num protowire.Number, n int) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	b = appendHeader(b, num, len(s))
	return append(b, s...)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// Decode parses a cache file. Any damage is an error; nothing of a damaged
// file is returned. Resource bodies alias data.
func Decode(data []byte) (*Snapshot, error) {
	if len(data) < len(magic)+sumSize || !bytes.Equal(data[:len(magic)], magic) {
		return nil, errors.New("not a zoneproxy xDS cache file")
	}
	body, sum := data[:len(data)-sumSize], data[len(data)-sumSize:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errors.New("checksum mismatch (torn or altered file)")
	}
	return decodeBody(body[len(magic):])
}

// decodeBody parses the body and checks what a usable cache must hold.
func decodeBody(b []byte) (*Snapshot, error) {
	s := &Snapshot{}
	var format uint64
	var haveID, haveTime bool
	seen := map[string]bool{}
	err := fields(b, func(num protowire.Number, v uint64, raw []byte) error {
		switch num {
		case fFormat:
			format = v
		case fIdentity:
			haveID = true
			return decodeIdentity(raw, &s.Identity)
		case fWrittenAt:
			haveTime = true
			s.WrittenAt = time.Unix(0, int64(v))
		case fBootstrap:
			s.Bootstrap = raw
		case fUpstream:
			if err := json.Unmarshal(raw, &s.Upstream); err != nil {
				return fmt.Errorf("upstream: %w", err)
			}
		case fType:
			t, err := decodeType(raw)
			if err != nil {
				return err
			}
			if seen[t.TypeURL] {
				return fmt.Errorf("type %s twice", t.TypeURL)
			}
			seen[t.TypeURL] = true
			s.Types = append(s.Types, t)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case format != formatVersion:
		return nil, fmt.Errorf("format %d, this zoneproxy reads %d", format, formatVersion)
	case !haveID || !haveTime:
		return nil, errors.New("identity or time missing")
	}
	return s, nil
}

func decodeIdentity(b []byte, id *Identity) error {
	return fields(b, func(num protowire.Number, _ uint64, raw []byte) error {
		dst := map[protowire.Number]*string{fIDMesh: &id.Mesh, fIDName: &id.Name, fIDRole: &id.Role, fIDCP: &id.ControlPlane}[num]
		if dst == nil {
			return nil
		}
		return setString(dst, raw)
	})
}

func decodeType(b []byte) (TypeState, error) {
	var t TypeState
	names := map[string]bool{}
	err := fields(b, func(num protowire.Number, _ uint64, raw []byte) error {
		switch num {
		case fTypeURL:
			return setString(&t.TypeURL, raw)
		case fTypeVersion:
			return setString(&t.Version, raw)
		case fTypeResource:
			r, err := decodeResource(raw)
			if err != nil {
				return err
			}
			if names[r.Name] {
				return fmt.Errorf("resource %q twice", r.Name)
			}
			names[r.Name] = true
			t.Resources = append(t.Resources, r)
		}
		return nil
	})
	if err == nil && t.TypeURL == "" {
		err = errors.New("a type without its URL")
	}
	return t, err
}

func decodeResource(b []byte) (Resource, error) {
	var r Resource
	err := fields(b, func(num protowire.Number, _ uint64, raw []byte) error {
		switch num {
		case fResName:
			return setString(&r.Name, raw)
		case fResVersion:
			return setString(&r.Version, raw)
		case fResType:
			return setString(&r.TypeURL, raw)
		case fResBody:
			r.Body = raw
		}
		return nil
	})
	if err == nil && (r.Name == "" || r.TypeURL == "") {
		err = errors.New("a resource without name or type")
	}
	return r, err
}

func setString(dst *string, raw []byte) error {
	if !utf8.Valid(raw) {
		return errors.New("invalid UTF-8")
	}
	*dst = string(raw)
	return nil
}

// fields walks a protobuf-wire message: varints give v, length-delimited
// fields give raw. Unknown fields of those two kinds are skipped; other
// wire types are damage.
func fields(b []byte, each func(num protowire.Number, v uint64, raw []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v uint64
		var raw []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		default:
			return fmt.Errorf("field %d: unexpected wire type %d", num, typ)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := each(num, v, raw); err != nil {
			return err
		}
	}
	return nil
}

// encodeTo writes what Encode returns without holding it all: the file is
// streamed from the snapshot's own bodies, so a write costs no second copy
// of a megabyte-sized configuration.
func encodeTo(w io.Writer, s *Snapshot) error {
	s.normalize()
	h := sha256.New()
	out := &streamer{w: io.MultiWriter(w, h), buf: make([]byte, 0, 32<<10)}
	out.add(magic)
	out.add(appendBody(nil, &Snapshot{Identity: s.Identity, WrittenAt: s.WrittenAt, Bootstrap: s.Bootstrap}, upstreamJSON(s)))
	for _, t := range s.Types {
		out.add(appendHeader(nil, fType, typeSize(t)))
		out.add(appendString(appendString(nil, fTypeURL, t.TypeURL), fTypeVersion, t.Version))
		for _, r := range t.Resources {
			var head []byte
			head = appendHeader(head, fTypeResource, resourceSize(r))
			head = appendString(head, fResName, r.Name)
			head = appendString(head, fResVersion, r.Version)
			head = appendString(head, fResType, r.TypeURL)
			head = appendHeader(head, fResBody, len(r.Body))
			out.add(head)
			out.add(r.Body)
		}
	}
	out.flush()
	if out.err != nil {
		return out.err
	}
	_, err := w.Write(h.Sum(nil))
	return err
}

// streamer batches small writes; large ones go straight through.
type streamer struct {
	w   io.Writer
	buf []byte
	err error
}

func (s *streamer) add(b []byte) {
	if len(s.buf)+len(b) > cap(s.buf) {
		s.flush()
	}
	if len(b) > cap(s.buf) {
		s.write(b)
		return
	}
	s.buf = append(s.buf, b...)
}

func (s *streamer) flush() {
	s.write(s.buf)
	s.buf = s.buf[:0]
}

func (s *streamer) write(b []byte) {
	if s.err == nil && len(b) > 0 {
		_, s.err = s.w.Write(b)
	}
}
