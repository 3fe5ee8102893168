package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Envoy's listener and route protos, and the whole Bootstrap, drag in the
// access-log, CEL and matcher protos: about 3 MB of binary and several MiB
// of RSS at start-up, over the budgets (docs/benchmarks.md, "A simpler
// house"). The product reads the few fields it needs from them another way.
func TestTheBinaryDoesNotLinkEnvoysHeavyProtos(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, heavy := range []string{
		"github.com/envoyproxy/go-control-plane/envoy/config/listener/v3",
		"github.com/envoyproxy/go-control-plane/envoy/config/route/v3",
		"github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3",
		"cel.dev/expr",
	} {
		for _, dep := range strings.Fields(string(out)) {
			if dep == heavy {
				t.Errorf("zoneproxy links %s", heavy)
			}
		}
	}
}
