package lkgcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache/cachepb"
)

// The file is magic, a cachepb.Cache body, and the SHA-256 of both: a torn
// or altered file fails the checksum before anything in it is trusted.
var magic = []byte("ZPXDSLKG")

const (
	// formatVersion 2: the body is written by cachepb's generated codec,
	// which leaves out empty fields that format 1 always wrote; format 1
	// readers would judge such a file by rules it was not written to, so
	// they refuse it by its number instead. Format 1 reads as the same
	// message and is still read.
	formatVersion = 2
	oldestFormat  = 1
	sumSize       = sha256.Size
)

// Encode serializes s (normalized first) into the cache file format.
func Encode(s *Snapshot) []byte {
	var b bytes.Buffer
	_ = encodeTo(&b, s) // a bytes.Buffer takes every write
	return b.Bytes()
}

// encodeTo streams the file: the snapshot's fields, then each type as a
// message of its own. Serialized messages concatenate into their merge, so
// this is one Cache, and the write never holds a second copy of the whole
// configuration (megabytes), only the largest type's.
func encodeTo(w io.Writer, s *Snapshot) error {
	s.normalize()
	h := sha256.New()
	out := io.MultiWriter(w, h)
	if _, err := out.Write(magic); err != nil {
		return err
	}
	at, up := s.WrittenAt.UnixNano(), upstreamJSON(s)
	head := &cachepb.Cache{
		Format:            formatVersion,
		Identity:          &cachepb.Identity{Mesh: s.Identity.Mesh, Name: s.Identity.Name, Role: s.Identity.Role, ControlPlane: s.Identity.ControlPlane},
		WrittenAtUnixNano: &at,
		Bootstrap:         s.Bootstrap,
		UpstreamJson:      up,
	}
	buf, err := (proto.MarshalOptions{}).MarshalAppend(make([]byte, 0, bufferBound(s, up)), head)
	if err != nil {
		return err
	}
	if _, err := out.Write(buf); err != nil {
		return err
	}
	one := &cachepb.Cache{Types: []*cachepb.TypeState{{}}}
	var rs []cachepb.Resource // reused: one type's resources at a time
	for _, t := range s.Types {
		one.Types[0], rs = typeMessage(t, rs)
		if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], one); err != nil {
			return err
		}
		if _, err := out.Write(buf); err != nil {
			return err
		}
	}
	_, err = w.Write(h.Sum(nil))
	return err
}

// bufferBound is at least the encoded size of the header and of s's
// largest type, so one buffer holds each in turn.
func bufferBound(s *Snapshot, up []byte) int {
	const field = 1 + binary.MaxVarintLen32 // a tag and a length
	largest := 1<<10 + len(s.Bootstrap) + len(up)
	for _, t := range s.Types {
		n := 3*field + len(t.TypeURL) + len(t.Version)
		for _, r := range t.Resources {
			n += 5*field + len(r.Name) + len(r.Version) + len(r.TypeURL) + len(r.Body)
		}
		largest = max(largest, n)
	}
	return largest
}

// typeMessage is t as a message whose resources live in rs, grown if need
// be and returned for the next type.
func typeMessage(t TypeState, rs []cachepb.Resource) (*cachepb.TypeState, []cachepb.Resource) {
	if cap(rs) < len(t.Resources) {
		rs = make([]cachepb.Resource, len(t.Resources))
	}
	m := &cachepb.TypeState{TypeUrl: t.TypeURL, Version: t.Version, Resources: make([]*cachepb.Resource, len(t.Resources))}
	for i, r := range t.Resources {
		rs[i].Name, rs[i].Version, rs[i].TypeUrl, rs[i].Body = r.Name, r.Version, r.TypeURL, r.Body
		m.Resources[i] = &rs[i]
	}
	return m, rs
}

// upstreamJSON is the upstream field, nil when there is no upstream.
func upstreamJSON(s *Snapshot) []byte {
	if reflect.ValueOf(s.Upstream).IsZero() {
		return nil
	}
	b, _ := json.Marshal(s.Upstream) // plain strings, bytes and ints cannot fail
	return b
}

// Decode parses a cache file. Any damage is an error; nothing of a damaged
// file is returned.
func Decode(data []byte) (*Snapshot, error) {
	if len(data) < len(magic)+sumSize || !bytes.Equal(data[:len(magic)], magic) {
		return nil, errors.New("not a zoneproxy xDS cache file")
	}
	body, sum := data[:len(data)-sumSize], data[len(data)-sumSize:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errors.New("checksum mismatch (torn or altered file)")
	}
	var m cachepb.Cache
	if err := proto.Unmarshal(body[len(magic):], &m); err != nil {
		return nil, err
	}
	return fromMessage(&m)
}

// fromMessage checks what a usable cache must hold, and converts it.
func fromMessage(m *cachepb.Cache) (*Snapshot, error) {
	switch {
	case m.Format < oldestFormat || m.Format > formatVersion:
		return nil, fmt.Errorf("format %d, this zoneproxy reads %d to %d", m.Format, oldestFormat, formatVersion)
	case m.Identity == nil || m.WrittenAtUnixNano == nil:
		return nil, errors.New("identity or time missing")
	}
	id := m.Identity
	s := &Snapshot{
		Identity:  Identity{Mesh: id.Mesh, Name: id.Name, Role: id.Role, ControlPlane: id.ControlPlane},
		WrittenAt: time.Unix(0, *m.WrittenAtUnixNano),
		Bootstrap: orEmpty(m.Bootstrap),
	}
	if m.UpstreamJson != nil {
		if err := json.Unmarshal(m.UpstreamJson, &s.Upstream); err != nil {
			return nil, fmt.Errorf("upstream: %w", err)
		}
	}
	seen := map[string]bool{}
	for _, t := range m.Types {
		if seen[t.TypeUrl] {
			return nil, fmt.Errorf("type %s twice", t.TypeUrl)
		}
		seen[t.TypeUrl] = true
		ts, err := fromTypeMessage(t)
		if err != nil {
			return nil, err
		}
		s.Types = append(s.Types, ts)
	}
	return s, nil
}

func fromTypeMessage(m *cachepb.TypeState) (TypeState, error) {
	if m.TypeUrl == "" {
		return TypeState{}, errors.New("a type without its URL")
	}
	t := TypeState{TypeURL: m.TypeUrl, Version: m.Version, Resources: make([]Resource, len(m.Resources))}
	names := make(map[string]bool, len(m.Resources))
	for i, r := range m.Resources {
		if r.Name == "" || r.TypeUrl == "" {
			return TypeState{}, errors.New("a resource without name or type")
		}
		if names[r.Name] {
			return TypeState{}, fmt.Errorf("resource %q twice", r.Name)
		}
		names[r.Name] = true
		t.Resources[i] = Resource{Name: r.Name, Version: r.Version, TypeURL: r.TypeUrl, Body: orEmpty(r.Body)}
	}
	return t, nil
}

// orEmpty keeps format 1's reading of an empty field, which the generated
// codec leaves out (nil): present and empty.
func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
