// Command zoneproxy runs a mesh-scoped Kuma zone proxy.
package main

import (
	"os"

	"github.com/zoneproxy/zoneproxy/pkg/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stderr))
}
