package lkgcache

import (
	"bytes"
	"crypto/sha256"
	"reflect"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	full := func() *Snapshot {
		return &Snapshot{Identity: testID, WrittenAt: time.Unix(1900000000, 123), Bootstrap: []byte("admin: {}\n"),
			Upstream: cpdial.Target{Address: "cp:5678", ServerName: "cp", CAPEM: []byte("CA"), MaxReceiveMessageLength: 4 << 20},
			Types:    append(listenerTypes(), TypeState{TypeURL: SecretType, Resources: []Resource{trustBundle(t, "bundle")}})}
	}
	for name, edit := range map[string]func(*Snapshot){
		"everything set": func(*Snapshot) {},
		// Zero values are what the generated codec leaves out.
		"written at the epoch": func(s *Snapshot) { s.WrittenAt = time.Unix(0, 0) },
		"before the epoch":     func(s *Snapshot) { s.WrittenAt = time.Unix(-5, 0) },
		"empty identity":       func(s *Snapshot) { s.Identity = Identity{} },
		"no upstream":          func(s *Snapshot) { s.Upstream = cpdial.Target{} },
		"no types":             func(s *Snapshot) { s.Types = nil },
		"empty bootstrap":      func(s *Snapshot) { s.Bootstrap = []byte{} },
		"empty versions": func(s *Snapshot) {
			s.Types[0].Version, s.Types[0].Resources[0].Version = "", ""
		},
		// Types are written one at a time from a reused buffer: a large
		// one after a small one, and fewer resources after more.
		"types of every size": func(s *Snapshot) {
			s.Types = append(s.Types,
				TypeState{TypeURL: "big", Resources: []Resource{{Name: "b", TypeURL: "big", Body: bytes.Repeat([]byte{7}, 100<<10)}}},
				TypeState{TypeURL: "c", Resources: []Resource{{Name: "a", TypeURL: "c", Body: []byte("a")}, {Name: "b", TypeURL: "c", Body: []byte("b")}, {Name: "c", TypeURL: "c", Body: []byte{}}}},
				TypeState{TypeURL: "d", Resources: []Resource{{Name: "z", TypeURL: "d", Body: []byte("z")}}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := full()
			edit(s)
			data := Encode(s)
			got, err := Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			if !got.WrittenAt.Equal(s.WrittenAt) {
				t.Fatalf("written at %v, want %v", got.WrittenAt, s.WrittenAt)
			}
			got.WrittenAt = s.WrittenAt
			if !reflect.DeepEqual(got, s) {
				t.Fatalf("decoded %+v\nwant %+v", got, s)
			}
			if !bytes.Equal(Encode(got), data) {
				t.Fatal("re-encoding a decoded cache changes it")
			}
		})
	}
}

// The control plane is kept as JSON under the field names caches already
// written carry: renaming a field of cpdial.Target would lose it there.
func TestUpstreamKeepsTheFieldNamesOfWrittenCaches(t *testing.T) {
	s := &Snapshot{Identity: testID, WrittenAt: time.Unix(1, 0), Upstream: cpdial.Target{Address: "cp:5678", ServerName: "cp",
		CAPEM: []byte("CA"), Metadata: []cpdial.Header{{Key: "x-zone", Value: "east"}}, HadToken: true, MaxReceiveMessageLength: 4 << 20, HDS: true}}
	written := `{"Address":"cp:5678","ServerName":"cp","CAPEM":"Q0E=","Metadata":[{"Key":"x-zone","Value":"east"}],` +
		`"HadToken":true,"TokenPath":"","GoogleGRPC":false,"MaxReceiveMessageLength":4194304,"HDS":true}`
	if data := Encode(s); !bytes.Contains(data, []byte(written)) {
		t.Fatalf("the upstream is no longer written as\n%s\nin\n%q", written, data)
	}
}

func TestDecodeRejects(t *testing.T) {
	seal := func(body []byte) []byte {
		b := append(append([]byte(nil), magic...), body...)
		sum := sha256.Sum256(b)
		return append(b, sum[:]...)
	}
	valid := Encode(&Snapshot{Identity: testID, WrittenAt: time.Unix(1, 0)})
	body := valid[len(magic) : len(valid)-sumSize]
	for name, data := range map[string][]byte{
		"short":             magic,
		"wrong magic":       append([]byte("XXXXXXXX"), valid[8:]...),
		"bad checksum":      append(append([]byte(nil), valid[:len(valid)-1]...), valid[len(valid)-1]^1),
		"newer format":      seal(append([]byte{0x08, 0x03}, body[2:]...)),
		"no format":         seal(body[2:]),
		"no identity":       seal([]byte{0x08, 0x01, 0x18, 0x01}),
		"truncated field":   seal(append(append([]byte(nil), body...), 0x22, 0x05, 'a')),
		"group wire type":   seal(append(append([]byte(nil), body...), 0x33)),
		"resource no name":  seal(append(append([]byte(nil), body...), 0x2a, 0x05, 0x0a, 0x01, 't', 0x1a, 0x00)),
		"type twice":        seal(append(append(append([]byte(nil), body...), 0x2a, 0x03, 0x0a, 0x01, 't'), 0x2a, 0x03, 0x0a, 0x01, 't')),
		"invalid utf-8 url": seal(append(append([]byte(nil), body...), 0x2a, 0x03, 0x0a, 0x01, 0xff)),
		"upstream not JSON": seal(append(append([]byte(nil), body...), 0x32, 0x01, '{')),
	} {
		t.Run(name, func(t *testing.T) {
			if s, err := Decode(data); err == nil {
				t.Fatalf("decoded %+v", s)
			}
		})
	}
}

// FuzzDecode feeds sealed bodies, so the fuzzer reaches the parser past the
// checksum. Whatever decodes must re-encode to something that decodes equal.
func FuzzDecode(f *testing.F) {
	f.Add(Encode(&Snapshot{Identity: testID, WrittenAt: time.Unix(1900000000, 0), Types: listenerTypes()})[len(magic):])
	f.Add(Encode(&Snapshot{Identity: testID, WrittenAt: time.Unix(1, 0), Bootstrap: []byte("x"), Upstream: cpdial.Target{Address: "a:1"},
		Types: []TypeState{{TypeURL: SecretType, Resources: []Resource{trustBundle(f, "b")}}}})[len(magic):])
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) >= sumSize {
			body = body[:len(body)-sumSize] // seeds carry their old checksum
		}
		b := append(append([]byte(nil), magic...), body...)
		sum := sha256.Sum256(b)
		s, err := Decode(append(b, sum[:]...))
		if err != nil {
			return
		}
		_, _ = s.EarliestNotAfter() // must not panic on any secret body
		again, err := Decode(Encode(s))
		if err != nil {
			t.Fatalf("re-encoded cache does not decode: %v", err)
		}
		if !sameSnapshot(s, again) {
			t.Fatalf("round trip changed the cache:\n%+v\n%+v", s, again)
		}
	})
}

// sameSnapshot compares ignoring nil versus empty byte slices.
func sameSnapshot(a, b *Snapshot) bool {
	if a.Identity != b.Identity || !a.WrittenAt.Equal(b.WrittenAt) || !bytes.Equal(a.Bootstrap, b.Bootstrap) ||
		!reflect.DeepEqual(a.Upstream, b.Upstream) || len(a.Types) != len(b.Types) {
		return false
	}
	for i := range a.Types {
		ta, tb := a.Types[i], b.Types[i]
		if ta.TypeURL != tb.TypeURL || ta.Version != tb.Version || len(ta.Resources) != len(tb.Resources) {
			return false
		}
		for j := range ta.Resources {
			ra, rb := ta.Resources[j], tb.Resources[j]
			if ra.Name != rb.Name || ra.Version != rb.Version || ra.TypeURL != rb.TypeURL || !bytes.Equal(ra.Body, rb.Body) {
				return false
			}
		}
	}
	return true
}
