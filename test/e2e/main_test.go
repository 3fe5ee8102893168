// Package e2e runs the real zoneproxy binary against the test control
// plane and the Envoy stand-in, as an operator would.
package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

var bins harness.Binaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "zp-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins, err = harness.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
