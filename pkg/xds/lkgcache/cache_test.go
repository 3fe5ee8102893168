package lkgcache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/host/securedir"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func open(t *testing.T, dir string, id Identity, clk *clock) (*Cache, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	c, err := Open(Options{Dir: dir, Identity: id, Now: clk.Now, Log: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c, logs
}

func closeCache(t *testing.T, c *Cache) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A stored configuration survives a restart, in a private file.
func TestStoredConfigurationIsServedAfterRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	clk := &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	c, _ := open(t, dir, testID, clk)
	if _, err := c.Usable(); err == nil {
		t.Fatal("a fresh cache claims a usable configuration")
	}
	up := cpdial.Target{Address: "cp.example:5678", ServerName: "cp.example", CAPEM: []byte("CA"), HDS: true,
		Metadata: []cpdial.Header{{Key: "x-zone", Value: "east"}}}
	c.SetBootstrap([]byte("node: {id: default.zp-1}\n"), up)
	c.Store(listenerTypes())
	closeCache(t, c)

	for path, want := range map[string]os.FileMode{filepath.Join(dir, SubDir): 0o700, filepath.Join(dir, SubDir, FileName): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %04o, want %04o", path, fi.Mode().Perm(), want)
		}
	}

	clk.now = clk.now.Add(time.Hour)
	again, _ := open(t, dir, testID, clk)
	s, err := again.Usable()
	if err != nil {
		t.Fatal(err)
	}
	want := &Snapshot{Identity: testID, WrittenAt: clk.now.Add(-time.Hour), Bootstrap: []byte("node: {id: default.zp-1}\n"), Upstream: up, Types: listenerTypes()}
	want.normalize()
	if !s.WrittenAt.Equal(want.WrittenAt) || !reflect.DeepEqual(s.Types, want.Types) || !bytes.Equal(s.Bootstrap, want.Bootstrap) ||
		s.Identity != testID || !reflect.DeepEqual(s.Upstream, up) {
		t.Fatalf("loaded %+v\nwant %+v", s, want)
	}
}

func TestCacheOfAnotherIdentityIsNeverUsed(t *testing.T) {
	for name, other := range map[string]func(*Identity){
		"mesh":          func(i *Identity) { i.Mesh = "payments" },
		"name":          func(i *Identity) { i.Name = "zp-2" },
		"role":          func(i *Identity) { i.Role = "egress" },
		"control plane": func(i *Identity) { i.ControlPlane = "https://other:5678" },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			clk := &clock{now: time.Now()}
			c, _ := open(t, dir, testID, clk)
			c.Store(listenerTypes())
			closeCache(t, c)
			before, _ := os.ReadFile(filepath.Join(dir, SubDir, FileName))

			id := testID
			other(&id)
			c2, logs := open(t, dir, id, clk)
			if s, err := c2.Usable(); err == nil {
				t.Fatalf("served a cache made for %+v to %+v: %v", s.Identity, id, s)
			}
			if logs.FilterMessageSnippet("another proxy").Len() != 1 {
				t.Errorf("no warning about the other identity: %v", logs.All())
			}
			after, _ := os.ReadFile(filepath.Join(dir, SubDir, FileName))
			if !bytes.Equal(before, after) {
				t.Error("the other identity's cache was changed by opening it")
			}
		})
	}
}

func TestDamagedCacheIsDiscardedWithAWarning(t *testing.T) {
	clk := &clock{now: time.Now()}
	good := Encode(&Snapshot{Identity: testID, WrittenAt: clk.now, Types: listenerTypes()})
	defer func(m int) { maxFileBytes = m }(maxFileBytes)
	maxFileBytes = len(good) - 1 // a whole, valid file one byte over
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0x40
	for name, data := range map[string][]byte{
		"empty":               {},
		"truncated":           good[:len(good)-5],
		"half written":        good[:len(good)/2],
		"flipped byte":        flipped,
		"not a cache":         []byte("node: {id: x}\n"),
		"over the size bound": good,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, SubDir), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, SubDir, FileName), data, 0o600); err != nil {
				t.Fatal(err)
			}
			c, logs := open(t, dir, testID, clk)
			if _, err := c.Usable(); err == nil {
				t.Fatal("a damaged cache was judged usable")
			}
			if logs.FilterMessageSnippet("damaged").Len() != 1 {
				t.Errorf("no warning: %v", logs.All())
			}
			if _, err := os.Stat(filepath.Join(dir, SubDir, FileName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("damaged cache left in place: %v", err)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	withSecrets := func(rs ...Resource) []TypeState {
		return append(listenerTypes(), TypeState{TypeURL: SecretType, Resources: rs})
	}
	for _, tc := range []struct {
		name    string
		written time.Time
		types   []TypeState
		want    string // "" = usable
	}{
		{"fresh", now.Add(-time.Minute), listenerTypes(), ""},
		{"just under max age", now.Add(-72*time.Hour + time.Second), listenerTypes(), ""},
		{"older than max age", now.Add(-72*time.Hour - time.Second), listenerTypes(), "older than --cache-max-age 72h0m0s"},
		{"from the future", now.Add(time.Hour), listenerTypes(), "in the future"},
		{"valid certificate", now.Add(-time.Minute), withSecrets(tlsSecret(t, "identity", testutil.CertPEM(t, now.Add(time.Hour))), trustBundle(t, "bundle")), ""},
		{"expired certificate", now.Add(-time.Minute), withSecrets(tlsSecret(t, "identity", testutil.CertPEM(t, now.Add(-time.Second)))), "expired at 2030-06-01T11:59:59Z"},
		{"expires now", now.Add(-time.Minute), withSecrets(tlsSecret(t, "identity", testutil.CertPEM(t, now))), "expired"},
		{"earliest of a chain", now.Add(-time.Minute), withSecrets(tlsSecret(t, "identity",
			append(testutil.CertPEM(t, now.Add(time.Hour)), testutil.CertPEM(t, now.Add(-time.Hour))...))), "expired at 2030-06-01T11:00:00Z"},
		{"expired trust bundle", now.Add(-time.Minute), withSecrets(tlsSecret(t, "identity", testutil.CertPEM(t, now.Add(time.Hour))),
			trustBundlePEM(t, "bundle", testutil.CertPEM(t, now.Add(-2*time.Hour)), testutil.CertPEM(t, now.Add(-time.Hour)))), "expired at 2030-06-01T11:00:00Z"},
		{"trust bundle with one CA still valid", now.Add(-time.Minute), withSecrets(tlsSecret(t, "identity", testutil.CertPEM(t, now.Add(time.Hour))),
			trustBundlePEM(t, "bundle", testutil.CertPEM(t, now.Add(-time.Hour)), testutil.CertPEM(t, now.Add(2*time.Hour)))), ""},
		{"unreadable certificate", now.Add(-time.Minute), withSecrets(tlsSecret(t, "identity", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))), "unreadable certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Judge(&Snapshot{Identity: testID, WrittenAt: tc.written, Types: tc.types}, now, DefaultMaxAge)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("not usable: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// Why a cache too old is not served reads the same at every attempt, so
// that the agent, which logs the reason when it changes, says it once.
func TestJudgeTooOldReadsTheSameEveryTime(t *testing.T) {
	written := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	s := &Snapshot{Identity: testID, WrittenAt: written, Types: listenerTypes()}
	first := Judge(s, written.Add(73*time.Hour), DefaultMaxAge)
	later := Judge(s, written.Add(73*time.Hour+7*time.Second), DefaultMaxAge)
	if first == nil || later == nil || first.Error() != later.Error() {
		t.Fatalf("%v, then %v", first, later)
	}
	if want := "the cached configuration is older than --cache-max-age 72h0m0s (it was written at 2030-06-01T12:00:00Z)"; first.Error() != want {
		t.Errorf("%q, want %q", first, want)
	}
}

// A stuck disk never holds Store up; once it moves, the latest state is
// the one on disk.
func TestStoreNeverWaitsForTheDisk(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{now: time.Now()}
	c, _ := open(t, dir, testID, clk)
	release := make(chan struct{})
	entered := make(chan struct{}, 100)
	writes := 0
	c.writeOut = func(dir string, s *Snapshot) error {
		writes++
		entered <- struct{}{}
		<-release
		return writeAtomic(dir, s)
	}
	c.Store(listenerTypes())
	<-entered // the writer is now stuck on the disk

	stored := make(chan struct{})
	go func() {
		defer close(stored)
		for i := 0; i < 50; i++ {
			types := listenerTypes()
			types[0].Version = "v" + string(rune('a'+i%26))
			c.Store(types)
		}
		c.Store([]TypeState{{TypeURL: listenerType, Version: "latest"}})
	}()
	select {
	case <-stored:
	case <-time.After(30 * time.Second):
		t.Fatal("Store waited for the stuck disk")
	}
	close(release)
	closeCache(t, c)
	if writes > 2 {
		t.Errorf("%d writes for a burst stored while the disk was stuck, want the latest only (2)", writes)
	}
	data, err := os.ReadFile(filepath.Join(dir, SubDir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if s.Types[0].Version != "latest" {
		t.Fatalf("on disk: version %q, want the latest", s.Types[0].Version)
	}
}

func TestWriteFailureIsWarnedOncePerEpisode(t *testing.T) {
	dir := t.TempDir()
	c, logs := open(t, dir, testID, &clock{now: time.Now()})
	c.retryEvery = time.Hour // each attempt here follows a Store
	fail := true
	done := make(chan struct{}, 10)
	c.writeOut = func(dir string, s *Snapshot) error {
		defer func() { done <- struct{}{} }()
		if fail {
			return errors.New("no space left on device")
		}
		return writeAtomic(dir, s)
	}
	for i := 0; i < 3; i++ {
		c.Store(listenerTypes())
		<-done
	}
	fail = false
	c.Store(listenerTypes())
	<-done
	closeCache(t, c)
	if n := logs.FilterMessageSnippet("cannot write").Len(); n != 1 {
		t.Errorf("%d write warnings, want 1", n)
	}
	if n := logs.FilterMessageSnippet("written again").Len(); n != 1 {
		t.Errorf("%d recovery notes, want 1", n)
	}
	if s, err := c.Usable(); err != nil || s == nil {
		t.Fatalf("usable after a failed write: %v", err)
	}
}

// The cache dir is made private even if someone opened it up.
func TestCacheDirIsMadePrivate(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, SubDir)
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	open(t, dir, testID, &clock{now: time.Now()})
	fi, err := os.Stat(sub)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
}

func TestStateDirThatIsAFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, SubDir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir, Identity: testID})
	if err == nil || !strings.Contains(err.Error(), "--state-dir") {
		t.Fatalf("err = %v, want --state-dir named", err)
	}
}

// The agent hands over the state dir it opened and locked: the cache does
// not resolve the path again, and keeps writing once that handle is closed.
func TestCacheOpenedInAHeldStateDirOutlivesTheHandle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	held, err := securedir.Open(path, "--state-dir", true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := OpenIn(held, Options{Identity: testID})
	if err != nil {
		t.Fatal(err)
	}
	held.Close()
	c.SetBootstrap([]byte("node: {id: default.zp-1}\n"), cpdial.Target{Address: "cp.example:5678"})
	c.Store(listenerTypes())
	closeCache(t, c)
	st := Inspect(path, testID, 0, time.Now())
	if !st.Present || st.Problem != "" || st.Resources != 2 {
		t.Fatalf("after a write through the held dir: %+v", st)
	}
}

func TestLeftoverTempFilesAreRemoved(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, SubDir, ".xds-lkg-123.tmp")
	if err := os.MkdirAll(filepath.Dir(tmp), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	open(t, dir, testID, &clock{now: time.Now()})
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover temp file: %v", err)
	}
}

func TestInspect(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	clk := &clock{now: now.Add(-2 * time.Hour)}
	if st := Inspect(dir, testID, 0, now); st.Present || st.Problem != "no cache yet" {
		t.Fatalf("empty dir: %+v", st)
	}
	c, _ := open(t, dir, testID, clk)
	notAfter := now.Add(24 * time.Hour).Truncate(time.Second)
	c.Store(append(listenerTypes(), TypeState{TypeURL: SecretType, Resources: []Resource{tlsSecret(t, "id", testutil.CertPEM(t, notAfter))}}))
	closeCache(t, c)

	st := Inspect(dir, testID, 0, now)
	if !st.Present || !st.IdentityMatch || st.Age != 2*time.Hour || !st.EarliestNotAfter.Equal(notAfter) || st.Resources != 3 || st.Problem != "" {
		t.Fatalf("status %+v", st)
	}
	other := testID
	other.Mesh = "payments"
	if st := Inspect(dir, other, 0, now); st.IdentityMatch || !strings.Contains(st.Problem, "another proxy") {
		t.Fatalf("other identity: %+v", st)
	}
	if st := Inspect(dir, testID, time.Hour, now); !strings.Contains(st.Problem, "older than --cache-max-age 1h0m0s") {
		t.Fatalf("max age 1h: %+v", st)
	}
	// What another user could have written is not judged as a cache.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if st := Inspect(dir, testID, 0, now); st.Present || st.IdentityMatch || !strings.Contains(st.Problem, "writable by other users") {
		t.Fatalf("a state dir others may write: %+v", st)
	}
}

// A start from the cache fetches no bootstrap: the snapshots written after
// it keep the cached one, or the next restart would have none to serve.
func TestSnapshotsAfterAStartFromTheCacheKeepItsBootstrap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	clk := &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	c, _ := open(t, dir, testID, clk)
	up := cpdial.Target{Address: "cp.example:5678", ServerName: "cp.example", CAPEM: []byte("CA")}
	c.SetBootstrap([]byte("node: {id: default.zp-1}\n"), up)
	c.Store(listenerTypes())
	closeCache(t, c)

	for _, record := range []func(*Cache, []TypeState){
		func(c *Cache, ts []TypeState) { c.Store(ts) },
		func(c *Cache, ts []TypeState) { c.Update(func() []TypeState { return ts }) },
	} {
		clk.now = clk.now.Add(time.Minute)
		again, _ := open(t, dir, testID, clk)
		types := listenerTypes()
		types[0].Version = clk.now.Format(time.RFC3339)
		record(again, types)
		closeCache(t, again)

		last, _ := open(t, dir, testID, clk)
		s, err := last.Usable()
		if err != nil {
			t.Fatal(err)
		}
		if string(s.Bootstrap) != "node: {id: default.zp-1}\n" || !reflect.DeepEqual(s.Upstream, up) || s.Types[0].Version != types[0].Version {
			t.Fatalf("after a start from the cache: bootstrap %q, upstream %+v, version %q", s.Bootstrap, s.Upstream, s.Types[0].Version)
		}
		closeCache(t, last)
	}
}

// A write the disk refused is tried again without waiting for the
// configuration to change, which may not happen for hours.
func TestAFailedWriteIsRetried(t *testing.T) {
	dir := t.TempDir()
	c, _ := open(t, dir, testID, &clock{now: time.Now()})
	c.retryEvery = time.Millisecond
	attempts := make(chan error, 10)
	failures := 2
	c.writeOut = func(dir string, s *Snapshot) error {
		var err error
		if failures > 0 {
			failures--
			err = errors.New("no space left on device")
		} else {
			err = writeAtomic(dir, s)
		}
		attempts <- err
		return err
	}
	c.Store(listenerTypes())
	for i := 0; ; i++ {
		select {
		case err := <-attempts:
			if err != nil {
				continue
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no successful write after %d failed attempts", 2-failures)
		}
		break
	}
	data, err := os.ReadFile(filepath.Join(dir, SubDir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := Decode(data); err != nil || s.Types[0].Version != "v7" {
		t.Fatalf("on disk after the retries: %+v, %v", s, err)
	}
}
