// Command zoneproxy runs a mesh-scoped Kuma zone proxy.
package main

import (
	"os"
	"runtime"

	"github.com/zoneproxy/zoneproxy/pkg/cli"
	"github.com/zoneproxy/zoneproxy/pkg/host/reexec"
)

// The main goroutine keeps the main thread: Envoy is forked and the agent
// replaced in place on it (reexec.Main says why).
func init() { runtime.LockOSThread() }

func main() {
	os.Exit(reexec.Main(func() int { return cli.Main(os.Args[1:], os.Stderr) }))
}
