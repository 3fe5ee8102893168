package lkgcache

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Update defers reading the state: a burst of updates (one per ACK) is
// read a few times, not once each; Usable always sees the latest; Close
// writes the latest.
func TestUpdatesAreReadWhenNeeded(t *testing.T) {
	dir := t.TempDir()
	c, _ := open(t, dir, testID, &clock{now: time.Now()})
	var mu sync.Mutex
	version, reads := "", 0
	state := func() []TypeState {
		mu.Lock()
		defer mu.Unlock()
		reads++
		types := listenerTypes()
		types[0].Version = version
		return types
	}
	set := func(v string) {
		mu.Lock()
		version = v
		mu.Unlock()
		c.Update(state)
	}
	const burst = 100
	for i := 0; i < burst; i++ {
		set("v" + string(rune('a'+i%26)))
	}
	set("latest")
	s, err := c.Usable()
	if err != nil {
		t.Fatal(err)
	}
	if s.Types[0].Version != "latest" {
		t.Fatalf("Usable after the burst: version %q, want the latest", s.Types[0].Version)
	}
	mu.Lock()
	n := reads
	mu.Unlock()
	if n > 3 { // Usable's read and at most a settled write or two
		t.Fatalf("the state was read %d times for a burst of %d updates", n, burst+1)
	}

	set("at close")
	closeCache(t, c)
	data, err := os.ReadFile(filepath.Join(dir, SubDir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	s, err = Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if s.Types[0].Version != "at close" {
		t.Fatalf("on disk: version %q, want the last update's", s.Types[0].Version)
	}
}
