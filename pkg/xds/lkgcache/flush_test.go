package lkgcache

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// Before the agent replaces itself, Flush puts the latest configuration on
// disk at once, and the cache goes on writing: a failed replacement leaves
// the agent whole.
func TestFlushWritesNowAndKeepsTheWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	clk := &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	c, _ := open(t, dir, testID, clk)
	c.SetBootstrap([]byte("node: {id: default.zp-1}\n"), cpdial.Target{Address: "cp.example:5678"})
	c.writeOut = slowWrite(c.writeOut)
	c.Store(listenerTypes())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := readBack(t, dir, clk); s == nil || !s.WrittenAt.Equal(clk.now) {
		t.Fatalf("after Flush the file holds %+v", s)
	}
	clk.now = clk.now.Add(time.Minute)
	c.Store(listenerTypes())
	if err := c.Flush(ctx); err != nil {
		t.Fatal("a second flush:", err)
	}
	if s := readBack(t, dir, clk); s == nil || !s.WrittenAt.Equal(clk.now) {
		t.Fatalf("the writer stopped after Flush: the file holds %+v", s)
	}
}

// readBack is the cache file as another cache (the next agent) reads it.
func readBack(t *testing.T, dir string, clk *clock) *Snapshot {
	t.Helper()
	other, err := Open(Options{Dir: dir, Identity: testID, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	other.mu.Lock()
	defer other.mu.Unlock()
	return other.current
}

// slowWrite makes a write take longer than the writer's settle time, so
// that a Flush that did not wait for it would find the old file.
func slowWrite(w func(string, *Snapshot) error) func(string, *Snapshot) error {
	return func(dir string, s *Snapshot) error {
		time.Sleep(2 * writeSettle)
		return w(dir, s)
	}
}

// After an Envoy handover to another bootstrap, the configuration held
// goes with that bootstrap at once: a reload's flush before any further
// update writes it, and the next program serves and compares the right one.
func TestReplaceBootstrapIsWrittenWithTheConfigurationHeld(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	clk := &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	c, _ := open(t, dir, testID, clk)
	up := cpdial.Target{Address: "cp.example:5678"}
	c.SetBootstrap([]byte("node: {id: default.zp-1}\n"), up)
	c.Store(listenerTypes())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stored := clk.now
	clk.now = clk.now.Add(time.Minute)
	c.ReplaceBootstrap([]byte("node: {id: default.zp-1}\nlayeredRuntime: {}\n"), up)
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s := readBack(t, dir, clk)
	if s == nil || string(s.Bootstrap) != "node: {id: default.zp-1}\nlayeredRuntime: {}\n" || !s.WrittenAt.Equal(stored) || len(s.Types) == 0 {
		t.Fatalf("after ReplaceBootstrap and a flush the file holds %+v", s)
	}
}
