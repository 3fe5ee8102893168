package upgrade

import (
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/zoneproxy/zoneproxy/pkg/host/securedir"
)

// The new program's side of a reload: what the previous program handed
// over is taken at each step of the start instead of made anew. With an
// Envoy handed over, nothing that Envoy uses is touched; without one (the
// previous program waited for the mesh or the control plane), the new
// program starts over on the handed-over dirs and listeners.

// Handover is what the previous program handed over as reexec.Take gives
// it: the state and the open files, each taken once.
type Handover interface {
	State(v any) error
	File(name string) *os.File
	Close()
}

// Taken is a handover read; its methods are nil-safe: a nil Taken is a
// fresh start, which was handed nothing.
type Taken struct {
	mu    sync.Mutex
	h     Handover
	State State
}

// Take reads what the previous program handed over; it closes h if this
// program cannot read it.
func Take(h Handover) (*Taken, error) {
	var st State
	if err := h.State(&st); err != nil {
		h.Close()
		return nil, fmt.Errorf("cannot read what the previous agent handed over: %w", err)
	}
	if st.Version != Version {
		h.Close()
		return nil, fmt.Errorf("the previous agent handed over version %d of its state; this build reads version %d", st.Version, Version)
	}
	return &Taken{h: h, State: st}, nil
}

// Envoy is the running Envoy handed over; nil: start one.
func (t *Taken) Envoy() *EnvoyState {
	if t == nil {
		return nil
	}
	return t.State.Envoy
}

// AdoptsEnvoy: the previous program handed over a running Envoy.
func (t *Taken) AdoptsEnvoy() bool { return t.Envoy() != nil }

// Place is the adopted Envoy's place in the handovers; generation 1 in
// slot A for an Envoy started here.
func (t *Taken) Place() Place {
	if e := t.Envoy(); e != nil {
		return e.Place()
	}
	return Place{Generation: 1, Slot: SlotA}
}

// File is the handed-over file name, once; nil if none.
func (t *Taken) File(name string) *os.File {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.h.File(name)
}

// EnvoyFile is a handed-over file that only an adopted Envoy uses.
func (t *Taken) EnvoyFile(name string) *os.File {
	if !t.AdoptsEnvoy() {
		return nil
	}
	return t.File(name)
}

// CloseUnclaimed closes what was handed over and not taken.
func (t *Taken) CloseUnclaimed() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.h.Close()
}

// LockedDir takes a handed-over directory (dirName), at the path the
// state gives, and its lock (lockName); handed false when the previous
// program handed over neither or only one.
func (t *Taken) LockedDir(dirName, lockName string, path func(*State) string) (d *securedir.Dir, lock *os.File, handed bool, err error) {
	dirF, lockF := t.File(dirName), t.File(lockName)
	if dirF == nil || lockF == nil {
		closeFiles(dirF, lockF)
		return nil, nil, false, nil
	}
	if d, err = securedir.Adopt(dirF, path(&t.State)); err != nil {
		closeFiles(dirF, lockF)
		return nil, nil, true, err
	}
	if lock, err = d.AdoptLock(lockF); err != nil {
		lockF.Close()
		d.Close()
		return nil, nil, true, err
	}
	return d, lock, true, nil
}

// Listener is the handed-over listener named name if it listens on addr
// still; nil otherwise (a changed port moves).
func (t *Taken) Listener(name, addr string) net.Listener {
	f := t.File(name)
	if f == nil {
		return nil
	}
	ln, err := net.FileListener(f)
	f.Close()
	if err == nil && sameAddress(ln.Addr(), addr) {
		return ln
	}
	if ln != nil {
		_ = ln.Close()
	}
	return nil
}

func sameAddress(have net.Addr, want string) bool {
	h, ok := have.(*net.TCPAddr)
	w, err := net.ResolveTCPAddr("tcp", want)
	if !ok || err != nil || h.Port != w.Port {
		return false
	}
	return h.IP.Equal(w.IP) || (h.IP.IsUnspecified() && (w.IP == nil || w.IP.IsUnspecified()))
}

// UnixListener is a handed-over Unix socket listener, which removes its
// socket file when closed, as the one it replaces would have.
func UnixListener(f *os.File) (net.Listener, error) {
	defer f.Close()
	ln, err := net.FileListener(f)
	if ul, ok := ln.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(true)
	}
	return ln, err
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}
