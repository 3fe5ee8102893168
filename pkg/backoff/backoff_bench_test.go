package backoff

import (
	"testing"
	"time"
)

func BenchmarkBackoffDelay(b *testing.B) {
	bo := Backoff{Initial: time.Second, Max: 5 * time.Second}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		_ = bo.Delay(n%8 + 1)
	}
}
