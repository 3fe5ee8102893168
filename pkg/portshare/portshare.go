// Package portshare finds other processes listening on a TCP port this
// host's Envoy listens on too. With SO_REUSEPORT (kuma-cp sets it on
// MeshMetric Prometheus listeners) two Envoys of one user bind the same
// address and port without an error, and the kernel spreads connections
// between them: scrapes of one mesh land on the other at random.
package portshare

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Proc is the /proc tree to read; tests point it elsewhere.
var Proc = "/proc"

const tcpListen = "0A"

// Others returns the pids of processes other than own (and its threads'
// shared fd table) that hold a listening TCP socket on port, plus how many
// such sockets belong to no process this user can see.
func Others(port int, own int) (pids []int, unseen int, err error) {
	inodes, err := listeningInodes(port)
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

// listeningInodes reads /proc/net/tcp and tcp6 for sockets listening on port.
func listeningInodes(port int) (map[string]bool, error) {
	out := map[string]bool{}
	want := fmt.Sprintf(":%04X", port)
	read := 0
	for _, name := range []string{"tcp", "tcp6"} {
		// Under the unit's ProcSubset=pid only /proc/<pid> is visible.
		f, err := os.Open(filepath.Join(Proc, "self", "net", name))
		if err != nil {
			continue // no IPv6, say
		}
		read++
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != tcpListen || !strings.HasSuffix(fields[1], want) {
				continue
			}
			out[fields[9]] = true
		}
		f.Close()
	}
	if read == 0 {
		return nil, fmt.Errorf("cannot read %s/self/net/tcp", Proc)
	}
	return out, nil
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
