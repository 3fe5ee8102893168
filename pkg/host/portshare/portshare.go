// Package portshare finds other processes listening on a TCP port this
// host's Envoy listens on too. With SO_REUSEPORT (kuma-cp sets it on
// MeshMetric Prometheus listeners) two Envoys of one user bind the same
// address and port without an error, and the kernel spreads connections
// between them: scrapes of one mesh land on the other at random.
package portshare

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Proc is the /proc tree to read; tests point it elsewhere.
var Proc = "/proc"

const tcpListen = "0A"

// Others returns the pids of processes other than own (and its threads'
// shared fd table) that hold a listening TCP socket on addr (ip:port),
// plus how many such sockets belong to no process this user can see.
// SO_REUSEPORT spreads connections only among sockets bound to the same
// address and port, so a listener on another address of the same port
// does not count, unless addr is a wildcard, which any address of its
// port takes connections from.
func Others(addr netip.AddrPort, own int) (pids []int, unseen int, err error) {
	inodes, err := listeningInodes(addr)
	if err != nil || len(inodes) == 0 {
		return nil, 0, err
	}
	ownInodes := socketInodes(own)
	foreign := map[string]bool{}
	for ino := range inodes {
		if !ownInodes[ino] {
			foreign[ino] = true
		}
	}
	if len(foreign) == 0 {
		return nil, 0, nil
	}
	entries, err := os.ReadDir(Proc)
	if err != nil {
		return nil, 0, err
	}
	found := map[string]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == own {
			continue
		}
		hit := false
		for ino := range socketInodes(pid) {
			if foreign[ino] {
				found[ino], hit = true, true
			}
		}
		if hit {
			pids = append(pids, pid)
		}
	}
	return pids, len(foreign) - len(found), nil
}

// listeningInodes reads /proc/net/tcp and tcp6 for sockets listening on addr.
func listeningInodes(addr netip.AddrPort) (map[string]bool, error) {
	out := map[string]bool{}
	port := fmt.Sprintf(":%04X", addr.Port())
	wildcard := addr.Addr().IsUnspecified()
	read := 0
	for _, name := range []string{"tcp", "tcp6"} {
		// Under the unit's ProcSubset=pid only /proc/<pid> is visible.
		f, err := os.Open(filepath.Join(Proc, "self", "net", name))
		if err != nil {
			continue // no IPv6, say
		}
		read++
		want := procAddr(addr.Addr(), name == "tcp6") + port
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != tcpListen {
				continue
			}
			if wildcard && strings.HasSuffix(fields[1], port) || !wildcard && fields[1] == want {
				out[fields[9]] = true
			}
		}
		f.Close()
	}
	if read == 0 {
		return nil, fmt.Errorf("cannot read %s/self/net/tcp", Proc)
	}
	return out, nil
}

// procAddr writes ip as /proc/net/tcp (v6 false) or tcp6 does: each 32-bit
// word in hex, in the host's byte order; an IPv4 address in tcp6 is its
// v4-mapped form. "" when ip cannot appear in that file.
func procAddr(ip netip.Addr, v6 bool) string {
	ip = ip.Unmap()
	var b []byte
	switch {
	case ip.Is4() && !v6:
		a := ip.As4()
		b = a[:]
	case v6:
		a := ip.As16() // v4-mapped for an IPv4 address
		b = a[:]
	default:
		return ""
	}
	var sb strings.Builder
	for i := 0; i < len(b); i += 4 {
		fmt.Fprintf(&sb, "%08X", binary.NativeEndian.Uint32(b[i:i+4]))
	}
	return sb.String()
}

// socketInodes lists the socket inodes pid holds open.
func socketInodes(pid int) map[string]bool {
	out := map[string]bool{}
	dir := filepath.Join(Proc, strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if ino, ok := strings.CutPrefix(target, "socket:["); ok {
			out[strings.TrimSuffix(ino, "]")] = true
		}
	}
	return out
}
