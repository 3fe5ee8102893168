package envoy

import (
	"os"
	"testing"
)

// WarmUp runs in every agent's start: it must not keep the handle it opens.
func TestWarmUpLeavesNoDescriptorOpen(t *testing.T) {
	before := openFDs(t)
	for range 3 {
		WarmUp()
	}
	if after := openFDs(t); after != before {
		t.Fatalf("%d open descriptors after WarmUp, %d before", after, before)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}
