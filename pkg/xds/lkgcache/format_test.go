package lkgcache

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache/cachepb"
)

// formatV1File is a cache file as zoneproxy wrote it with its hand-written
// encoder (format 1); it holds formatV1Snapshot.
var formatV1File = filepath.Join("testdata", "xds-lkg-format1")

func formatV1Snapshot(t testing.TB) *Snapshot {
	s := &Snapshot{Identity: testID, WrittenAt: time.Unix(1900000000, 123), Bootstrap: []byte("admin: {}\n"),
		Upstream: cpdial.Target{Address: "cp:5678", ServerName: "cp", CAPEM: []byte("CA"), HadToken: true,
			Metadata: []cpdial.Header{{Key: "x-zone", Value: "east"}}, MaxReceiveMessageLength: 4 << 20, HDS: true},
		Types: append(listenerTypes(), TypeState{TypeURL: SecretType, Version: "s1", Resources: []Resource{trustBundle(t, "bundle")}})}
	s.normalize()
	return s
}

func readFormatV1(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(formatV1File)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// An upgrade keeps the cache: a restart after it, while the control plane
// is unreachable, serves what the older zoneproxy wrote, and check reports
// it as before.
func TestFormat1CacheIsServedAfterAnUpgrade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(filepath.Join(dir, SubDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SubDir, FileName), readFormatV1(t), 0o600); err != nil {
		t.Fatal(err)
	}
	want := formatV1Snapshot(t)
	now := want.WrittenAt.Add(time.Hour)

	st := Inspect(dir, testID, 0, now)
	if !st.Present || !st.IdentityMatch || st.Resources != 3 || st.Age != time.Hour || st.Problem != "" {
		t.Fatalf("check reports the format-1 cache as %+v", st)
	}
	c, logs := open(t, dir, testID, &clock{now: now})
	s, err := c.Usable()
	if err != nil {
		t.Fatalf("the format-1 cache is not served: %v (log %v)", err, logs.All())
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("served %+v\nwant %+v", s, want)
	}
}

// A format-1 file is judged as any other: damage is refused whole.
func TestFormat1FileDamage(t *testing.T) {
	good := readFormatV1(t)
	reseal := func(edit func(body []byte) []byte) []byte {
		body := edit(append([]byte(nil), good[len(magic):len(good)-sumSize]...))
		b := append(append([]byte(nil), magic...), body...)
		sum := sha256.Sum256(b)
		return append(b, sum[:]...)
	}
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"a byte flipped": {flip(good, len(good)/2), "checksum mismatch"},
		"torn":           {good[:len(good)-10], "checksum mismatch"},
		"a newer format": {reseal(func(b []byte) []byte { b[1] = 3; return b }), "format 3, this zoneproxy reads 1 to 2"},
		"a resource cut": {reseal(func(b []byte) []byte { return b[:len(b)-5] }), "cannot parse"},
		"no time": {reseal(func(b []byte) []byte {
			return remarshal(t, b, func(m *cachepb.Cache) { m.WrittenAtUnixNano = nil })
		}), "identity or time missing"},
		"a type twice": {reseal(func(b []byte) []byte {
			return remarshal(t, b, func(m *cachepb.Cache) { m.Types = append(m.Types, m.Types[0]) })
		}), "type " + listenerType + " twice"},
		"a resource twice": {reseal(func(b []byte) []byte {
			return remarshal(t, b, func(m *cachepb.Cache) { m.Types[0].Resources = append(m.Types[0].Resources, m.Types[0].Resources[0]) })
		}), `resource "admin" twice`},
		"not UTF-8 a name": {reseal(func(b []byte) []byte {
			return bytes.Replace(b, []byte("zone-ingress"), []byte("zone-ingres\xff"), 1)
		}), "UTF-8"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := Decode(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decoded %+v, %v; want an error with %q", s, err, tc.want)
			}
		})
	}
}

func flip(data []byte, at int) []byte {
	b := append([]byte(nil), data...)
	b[at] ^= 1
	return b
}

// remarshal re-encodes body after edit.
func remarshal(t *testing.T, body []byte, edit func(m *cachepb.Cache)) []byte {
	t.Helper()
	var m cachepb.Cache
	if err := proto.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	edit(&m)
	b, err := proto.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A file this zoneproxy writes says format 2, so a zoneproxy that reads
// only format 1 (a downgrade) refuses it by its number and rebuilds.
func TestWrittenFilesAreFormat2(t *testing.T) {
	data := Encode(formatV1Snapshot(t))
	var m cachepb.Cache
	if err := proto.Unmarshal(data[len(magic):len(data)-sumSize], &m); err != nil {
		t.Fatal(err)
	}
	if m.Format != 2 {
		t.Fatalf("written as format %d", m.Format)
	}
}

// A write the disk fails at any point is an error, even when the writes
// after it succeed, so the writer never renames a file with a hole over
// the cache.
func TestAFailedWriteIsAnError(t *testing.T) {
	s := formatV1Snapshot(t)
	size := len(Encode(s))
	for _, at := range []int{0, len(magic), len(magic) + 10, size - sumSize - 10, size - sumSize, size - 1} {
		if err := encodeTo(&failingWriter{failAt: at}, s); err == nil {
			t.Errorf("a disk failing at byte %d of %d: no error", at, size)
		}
	}
}

// failingWriter fails the one write that reaches byte failAt.
type failingWriter struct{ failAt, written int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.written <= w.failAt && w.failAt < w.written+len(p) {
		w.written += len(p)
		return 0, errors.New("input/output error")
	}
	w.written += len(p)
	return len(p), nil
}
