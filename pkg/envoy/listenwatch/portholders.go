package listenwatch

import (
	"fmt"
	"net"
	"net/netip"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/zoneproxy/zoneproxy/pkg/host/preflight/procnet"
)

// bindable reports whether Envoy could bind ap now: a socket with
// SO_REUSEADDR, as Envoy's listen sockets have, is bound and closed at
// once, without listening, so that no connection is ever taken. Without
// SO_REUSEPORT it is stricter than Envoy, never looser. err: the agent
// cannot tell (it may not bind what Envoy may).
func bindable(ap netip.AddrPort) (bool, error) {
	ip := ap.Addr().Unmap()
	family := syscall.AF_INET
	var sa syscall.Sockaddr = &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ip.As4()}
	if ip.Is6() {
		family = syscall.AF_INET6
		zone := 0
		if z := ip.Zone(); z != "" {
			if ifi, err := net.InterfaceByName(z); err == nil {
				zone = ifi.Index
			}
		}
		sa = &syscall.SockaddrInet6{Port: int(ap.Port()), Addr: ip.As16(), ZoneId: uint32(zone)}
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer syscall.Close(fd)
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		return false, err
	}
	switch err := syscall.Bind(fd, sa); err {
	case nil:
		return true, nil
	case syscall.EADDRINUSE, syscall.EADDRNOTAVAIL:
		return false, nil
	default:
		return false, err
	}
}

// portHolder is a process with a listening socket that keeps Envoy from
// binding a port.
type portHolder struct {
	pid  int // 0: not visible to the agent (another user's, ProtectProc)
	comm string
	uid  int
}

func (h portHolder) String() string {
	if h.pid > 0 {
		return fmt.Sprintf("pid %d (%s)", h.pid, h.comm)
	}
	who := "uid " + strconv.Itoa(h.uid)
	if u, err := user.LookupId(strconv.Itoa(h.uid)); err == nil {
		who = fmt.Sprintf("user %s (uid %d)", u.Username, h.uid)
	}
	return "a process of " + who + " that the agent cannot see"
}

// portHolders lists who listens on a port that conflicts with ap: the
// same port on the same address, or where either is a wildcard. Sockets
// come from /proc/self/net/tcp and tcp6 (visible under ProcSubset=pid),
// processes from /proc/<pid>/fd where readable; a socket of a process the
// agent cannot see is told by its uid.
func portHolders(ap netip.AddrPort) ([]portHolder, error) {
	socks, err := procnet.Sockets()
	if err != nil {
		return nil, err
	}
	held := procnet.Conflicting(socks, ap.Addr(), ap.Port())
	inodes := make([]uint64, 0, len(held))
	for _, s := range held {
		inodes = append(inodes, s.Inode)
	}
	procs := procnet.Holders(inodes)
	var out []portHolder
	for _, s := range held {
		ps := procs[s.Inode]
		if len(ps) == 0 {
			out = append(out, portHolder{uid: int(s.UID)})
		}
		for _, p := range ps {
			out = append(out, portHolder{pid: p.PID, comm: p.Comm, uid: int(s.UID)})
		}
	}
	slices.SortFunc(out, func(a, b portHolder) int {
		if (a.pid == 0) != (b.pid == 0) {
			return b.pid - a.pid // visible processes first
		}
		if a.pid != b.pid {
			return a.pid - b.pid
		}
		return a.uid - b.uid
	})
	return slices.Compact(out), nil
}

func holdersText(hs []portHolder) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.String()
	}
	return strings.Join(parts, ", ")
}
