// Package reuseport tells whether this network namespace lets a zone proxy
// hand its listeners from one Envoy to another without resetting clients.
//
// During a handover both Envoys listen on the same address with
// SO_REUSEPORT and the kernel gives each socket its own accept queue. When
// the old Envoy closes its sockets, clients still waiting in their queues
// (handshake done, not yet accepted) are reset, unless
// net.ipv4.tcp_migrate_req is 1 (Linux 5.14 and later, per network
// namespace): then the kernel moves them to the new Envoy's socket.
package reuseport

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// sysctlPath is net.ipv4.tcp_migrate_req under /proc.
const sysctlPath = "sys/net/ipv4/tcp_migrate_req"

// SnippetPath is where the packages install the sysctl.d file that sets it.
const SnippetPath = "/usr/lib/sysctl.d/60-zoneproxy.conf"

// Verdict is what the kernel does with queued clients of a closing
// listener.
type Verdict struct {
	// Migrates is true when net.ipv4.tcp_migrate_req is 1.
	Migrates bool
	// Warning says, in plain words, what happens without it and the fix;
	// empty when Migrates.
	Warning string
	// Err is set when the value could not be read for another reason than
	// an old kernel; Warning then says so too.
	Err error
}

// Check reads net.ipv4.tcp_migrate_req for the caller's network namespace.
func Check() Verdict { return check(os.DirFS("/proc")) }

const consequence = "during an Envoy handover, clients waiting in the old Envoy's accept queue are reset when it closes its listeners"

func check(proc fs.FS) Verdict {
	raw, err := fs.ReadFile(proc, sysctlPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Verdict{Warning: "this kernel has no net.ipv4.tcp_migrate_req (Linux 5.14 or later has it): " + consequence + "; a handover can reset a few connections"}
	case err != nil:
		return Verdict{
			Err:     err,
			Warning: fmt.Sprintf("cannot read net.ipv4.tcp_migrate_req (%v): if it is 0, %s; check it with `sysctl net.ipv4.tcp_migrate_req`", err, consequence),
		}
	}
	switch v := strings.TrimSpace(string(raw)); v {
	case "1":
		return Verdict{Migrates: true}
	case "0":
		return Verdict{Warning: "net.ipv4.tcp_migrate_req is 0: " + consequence + "; set it with `sysctl -w net.ipv4.tcp_migrate_req=1` and keep it with " + SnippetPath + " (installed by the package; `sysctl --system` applies it)"}
	default:
		return Verdict{
			Err:     fmt.Errorf("%s: unexpected value %q", filepath.Join("/proc", sysctlPath), v),
			Warning: fmt.Sprintf("net.ipv4.tcp_migrate_req reads %q, neither 0 nor 1: set it with `sysctl -w net.ipv4.tcp_migrate_req=1`", v),
		}
	}
}
