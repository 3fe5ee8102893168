package preflight

import (
	"fmt"
	"net"
	"net/netip"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"github.com/zoneproxy/zoneproxy/pkg/host/preflight/procnet"
)

// holderOf names what holds addr's port, from the kernel's socket tables
// and, where this user may read them, the processes' file descriptors:
// "it is held by pid 4242 (python3) of uid 1001 (alice)", or only the uid
// when the process is another user's (the unit's ProtectProc=invisible
// hides other users' processes).
var holderOf = func(addr string) string {
	socks, err := procnet.Sockets()
	if err != nil {
		return "cannot tell what holds it: " + err.Error()
	}
	held := conflicting(socks, addr)
	if len(held) == 0 {
		return "no listener on it is in " + procnet.Proc + "/self/net/tcp (it was freed meanwhile, or a socket is bound to it without listening)"
	}
	inodes := make([]uint64, 0, len(held))
	for _, s := range held {
		if s.Inode != 0 {
			inodes = append(inodes, s.Inode)
		}
	}
	procs := procnet.Holders(inodes)
	var names []string
	for _, s := range held {
		owner := "uid " + uidName(s.UID)
		ps := procs[s.Inode]
		if len(ps) == 0 {
			names = append(names, "a socket ("+s.Local.String()+") of "+owner+" whose process this user cannot see")
			continue
		}
		var pids []string
		for _, p := range ps {
			pids = append(pids, fmt.Sprintf("pid %d (%s)", p.PID, p.Comm))
		}
		names = append(names, strings.Join(pids, ", ")+" of "+owner)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	return "it is held by " + strings.Join(names, "; and by ")
}

// conflicting are the sockets that keep addr (host:port) from being
// bound (procnet.Conflicting); a host that is not an IP matches on the
// port alone.
func conflicting(socks []procnet.Socket, addr string) []procnet.Socket {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil
	}
	ip, _ := netip.ParseAddr(host) // invalid for a host name
	return procnet.Conflicting(socks, ip, uint16(port))
}

// uidName is "1001 (alice)", or "1001" when the name is unknown.
func uidName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil && u.Username != "" {
		return id + " (" + u.Username + ")"
	}
	return id
}
