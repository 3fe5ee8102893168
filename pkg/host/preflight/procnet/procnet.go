// Package procnet reads the kernel's TCP socket tables (/proc/self/net/tcp
// and tcp6): each socket's addresses, state, owner and inode, and which
// processes hold a socket. The agent names what holds a port it cannot
// bind, and tells which user sent a request on its loopback port.
//
// /proc/self/net is read rather than /proc/net: under the unit's
// ProcSubset=pid only /proc/<pid> is visible. The tables list every socket
// of the network namespace, whoever owns it; another user's /proc/<pid>/fd
// is not readable (ProtectProc=invisible hides the process altogether), so
// a socket's processes may stay unknown while its uid is always known.
package procnet

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Proc is the /proc tree to read; tests point it at a copy.
var Proc = "/proc"

// TCP states as the tables write them.
const (
	Established = 0x01
	TimeWait    = 0x06
	Listen      = 0x0A
)

// Socket is one line of /proc/self/net/tcp or tcp6.
type Socket struct {
	Local, Remote netip.AddrPort // an IPv4 address in tcp6 is v4-mapped
	State         uint8
	UID           uint32
	// Inode is 0 for a socket no file refers to any more: one in TIME_WAIT
	// (whose UID the kernel shows as 0, whoever owned it) or one closed by
	// its owner while the kernel finishes it.
	Inode uint64
}

// Sockets reads both tables. A missing tcp6 (IPv6 disabled) is no error.
func Sockets() ([]Socket, error) {
	var out []Socket
	read := 0
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(Proc, "self", "net", name))
		if err != nil {
			continue
		}
		read++
		socks, err := parse(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s/self/net/%s: %w", Proc, name, err)
		}
		out = append(out, socks...)
	}
	if read == 0 {
		return nil, fmt.Errorf("cannot read %s/self/net/tcp", Proc)
	}
	return out, nil
}

func parse(f *os.File) ([]Socket, error) {
	var out []Socket
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		local, err1 := parseAddr(fields[1])
		remote, err2 := parseAddr(fields[2])
		st, err3 := strconv.ParseUint(fields[3], 16, 8)
		uid, err4 := strconv.ParseUint(fields[7], 10, 32)
		ino, err5 := strconv.ParseUint(fields[9], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil {
			return nil, fmt.Errorf("unexpected line %q", sc.Text())
		}
		out = append(out, Socket{Local: local, Remote: remote, State: uint8(st), UID: uint32(uid), Inode: ino})
	}
	return out, sc.Err()
}

// parseAddr reads "0100007F:1F90": the address as 32-bit words in hex, each
// in the host's byte order, then the port in hex.
func parseAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok || (len(a) != 8 && len(a) != 32) {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	raw, err := hex.DecodeString(a)
	if err != nil {
		return netip.AddrPort{}, err
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ip, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(ip, uint16(port)), nil
}

// Same reports whether a and b are one address and port, an IPv4 address
// and its v4-mapped form alike.
func Same(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// Conflicting are the listening sockets of socks that keep a socket on
// ip:port from being bound: the same port at the same address, or where
// either is a wildcard. An IPv6 wildcard takes IPv4 addresses too (unless
// IPV6_V6ONLY, which the tables do not show). An invalid ip (the address
// is a host name) matches on the port alone.
func Conflicting(socks []Socket, ip netip.Addr, port uint16) []Socket {
	var out []Socket
	for _, s := range socks {
		if s.State == Listen && s.Local.Port() == port && (!ip.IsValid() || addrsConflict(s.Local.Addr(), ip)) {
			out = append(out, s)
		}
	}
	return out
}

// addrsConflict: a listener on a (of the same port) keeps one on b from
// binding.
func addrsConflict(a, b netip.Addr) bool {
	a, b = a.Unmap(), b.Unmap()
	if a.Is4() == b.Is4() {
		return a == b || a.IsUnspecified() || b.IsUnspecified()
	}
	if a.Is6() {
		return a.IsUnspecified()
	}
	return b.IsUnspecified()
}

// Process is one process holding a socket.
type Process struct {
	PID  int
	Comm string // its command name, as /proc/<pid>/comm has it
}

// Holders maps each of inodes to the processes that hold it open, among
// those whose file descriptors this user may read. Inodes no visible
// process holds are absent.
func Holders(inodes []uint64) map[uint64][]Process {
	out := map[uint64][]Process{}
	if len(inodes) == 0 {
		return out
	}
	want := map[string]uint64{}
	for _, ino := range inodes {
		want["socket:["+strconv.FormatUint(ino, 10)+"]"] = ino
	}
	entries, err := os.ReadDir(Proc)
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join(Proc, e.Name(), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue // another user's, or gone
		}
		var comm string
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join(dir, fd.Name()))
			if err != nil {
				continue
			}
			ino, ok := want[target]
			if !ok {
				continue
			}
			if comm == "" {
				b, _ := os.ReadFile(filepath.Join(Proc, e.Name(), "comm"))
				comm = strings.TrimSpace(string(b))
			}
			if !slices.ContainsFunc(out[ino], func(p Process) bool { return p.PID == pid }) {
				out[ino] = append(out[ino], Process{PID: pid, Comm: comm})
			}
		}
	}
	return out
}
