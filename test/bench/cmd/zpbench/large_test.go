package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestXDSRecorderPairsResponsesWithTheirACKs(t *testing.T) {
	x := newXDSRecorder()
	line := func(format string, args ...any) {
		fmt.Fprintf(x, "2026-11-27T16:42:06.000Z "+format+"\n", args...)
	}
	line("ads: stream 1 opened")
	line("ads: sent node=payments.a type=Cluster nonce=1 resources=[c1 c2 c3] removed=[]")
	time.Sleep(2 * time.Millisecond)
	line("ads: sent node=payments.a type=Cluster nonce=4 resources=[c4] removed=[]")
	line("ads: ACK node=payments.a type=Cluster nonce=1")
	line("ads: sent node=payments.a type=Listener nonce=2 resources=[] removed=[]")
	line("ads: NACK node=payments.a type=Listener nonce=2: bad listener")

	rt, n, ok := x.roundTrip("payments.a", "Cluster")
	if !ok || n != 3 || rt < 2*time.Millisecond {
		t.Errorf("Cluster: %v %d %v, want the first response (3 resources) → its ACK, ≥ 2 ms", rt, n, ok)
	}
	if _, _, ok := x.roundTrip("payments.a", "Listener"); ok {
		t.Error("a NACKed response has a round trip")
	}
	if _, _, ok := x.roundTrip("payments.b", "Cluster"); ok {
		t.Error("another node's round trip")
	}
	if got := x.nack("payments.a"); !strings.Contains(got, "bad listener") {
		t.Errorf("nack %q", got)
	}
}

func TestServiceCounts(t *testing.T) {
	for n, want := range map[int]string{1: "1 service", 999: "999 services", 1000: "1,000 services", 1234567: "1,234,567 services"} {
		if got := services(n); got != want {
			t.Errorf("services(%d) = %q, want %q", n, got, want)
		}
	}
	if largeResources(1000) != 2003 {
		t.Errorf("largeResources(1000) = %d", largeResources(1000))
	}
	if largeTarget(1) != "none (reported)" || largeTarget(5000) != "none (reported)" || !strings.HasPrefix(largeTarget(1000), "≤ 30 MiB") {
		t.Errorf("targets %q %q %q", largeTarget(1), largeTarget(1000), largeTarget(5000))
	}
}

func TestLargeSettings(t *testing.T) {
	t.Setenv("ZPBENCH_LARGE_SERVICES", "1000, 5000")
	s, err := loadSettings()
	if err != nil || len(s.largeServices) != 2 || s.largeServices[1] != 5000 {
		t.Fatalf("%v %v", s.largeServices, err)
	}
	for _, bad := range []string{"1", "x", "1000,"} {
		t.Setenv("ZPBENCH_LARGE_SERVICES", bad)
		if _, err := loadSettings(); err == nil {
			t.Errorf("ZPBENCH_LARGE_SERVICES=%q accepted", bad)
		}
	}
}
