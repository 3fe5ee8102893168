// Package reexec replaces the agent's program in place (execve) while
// keeping what must outlive it: listening sockets, pipes, FIFOs, and a
// small state record. The PID stays the same, so Envoy stays the agent's
// child and its listeners never close; the kernel keeps connections queued
// on a listening socket that is carried across.
//
// The files and the state travel in a manifest written to a memfd, whose
// descriptor number the new program finds in ZONEPROXY_HANDOVER_FD. Nothing
// secret belongs in the state: /proc/PID/fd shows the memfd to the same
// user and root.
package reexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/zoneproxy/zoneproxy/pkg/host/securedir"
)

// EnvVar names the manifest's descriptor in the new program's environment.
const EnvVar = "ZONEPROXY_HANDOVER_FD"

// ManifestVersion changes when the manifest's shape does: a program that
// does not know it refuses the handover instead of misreading it.
const ManifestVersion = 1

// sealed are the seals that keep the handover record as it was written.
const sealed = unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL

type manifest struct {
	Version int             `json:"version"`
	Files   map[string]int  `json:"files"`
	State   json.RawMessage `json:"state,omitempty"`
}

// Exec runs path with args and env in place of this program, handing it
// files (by name) and state (encoded as JSON). It returns only on failure,
// with the files as they were: closed on exec again, nothing leaked.
// proceed, if set, runs last before the exec, and an error from it stops
// the exec: the last word on whether to go on, as late as it can be.
func Exec(path string, args, env []string, files map[string]*os.File, state any, proceed func() error) (err error) {
	prog, err := OpenProgram(path)
	if err != nil {
		return err
	}
	defer prog.Close()
	m := manifest{Version: ManifestVersion, Files: make(map[string]int, len(files))}
	if state != nil {
		if m.State, err = json.Marshal(state); err != nil {
			return fmt.Errorf("cannot encode the state to hand over: %w", err)
		}
	}
	// No fork may happen while the files are inheritable: its child
	// would keep them open.
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	var kept []int
	defer func() {
		if err != nil {
			for _, fd := range kept {
				syscall.CloseOnExec(fd)
			}
		}
	}()
	for name, f := range files {
		fd, err := descriptor(f)
		if err == nil {
			_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0)
		}
		if err != nil {
			return fmt.Errorf("cannot keep %s open across the exec: %w", name, err)
		}
		kept = append(kept, fd)
		m.Files[name] = fd
	}
	mfd, err := writeManifest(m)
	if err != nil {
		return err
	}
	kept = append(kept, mfd)
	defer func() {
		if err != nil {
			_ = unix.Close(mfd)
		}
	}()
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, EnvVar+"=") })
	env = append(env, EnvVar+"="+strconv.Itoa(mfd))
	if proceed != nil {
		if err := proceed(); err != nil {
			return err
		}
	}
	// Run exactly the file checked: the kernel opens the program through
	// the descriptor before closing it on exec.
	if err := syscall.Exec("/proc/self/fd/"+strconv.Itoa(int(prog.Fd())), args, env); err != nil {
		return fmt.Errorf("cannot run %s: %w", path, err)
	}
	return nil
}

// OpenProgram opens path and checks, on the open file, that only root or
// this user could have put it there.
func OpenProgram(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot run %s: %w", path, err)
	}
	if err := securedir.CheckExecutable(f, path); err != nil {
		f.Close()
		return nil, fmt.Errorf("refusing to run %s: %w", path, err)
	}
	return f, nil
}

// descriptor is f's number. Not f.Fd(), which puts the file in blocking
// mode: a listener's accept would then block a thread, and Close could no
// longer interrupt it, should the exec fail and the program go on.
func descriptor(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if err := rc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return -1, err
	}
	return fd, nil
}

// writeManifest writes m to a new memfd, left inheritable and rewound.
func writeManifest(m manifest) (int, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return -1, err
	}
	fd, err := unix.MemfdCreate("zoneproxy-handover", unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("cannot create the handover record: %w", err)
	}
	f := os.NewFile(uintptr(fd), "handover")
	if _, err := f.Write(b); err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, sealed)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return -1, fmt.Errorf("cannot write the handover record: %w", err)
	}
	// The os.File must not close fd when collected: dup it away from it.
	nfd, err := unix.Dup(fd)
	f.Close()
	if err != nil {
		return -1, fmt.Errorf("cannot keep the handover record: %w", err)
	}
	return nfd, nil
}

// Handover is what the previous program handed over.
type Handover struct {
	files map[string]*os.File
	state json.RawMessage
}

// ErrNotHandedOver is returned by Take when the program was started
// normally.
var ErrNotHandedOver = errors.New("not started by a handover")

// Take reads the handover the previous program left, once: the variable
// is removed from the environment (so that Envoy and other children do
// not see it), and every handed-over file is closed on exec again.
func Take() (*Handover, error) {
	v, ok := os.LookupEnv(EnvVar)
	if !ok {
		return nil, ErrNotHandedOver
	}
	os.Unsetenv(EnvVar)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q is not a descriptor", EnvVar, v)
	}
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "handover")
	defer f.Close()
	// Only a record nobody can change after it was written is read.
	if seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0); err != nil || seals&sealed != sealed {
		return nil, fmt.Errorf("the handover record (descriptor %d) is not a sealed memfd: refusing it", fd)
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("cannot read the handover record: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("the handover record is unreadable: %w", err)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("the handover record has version %d; this build reads version %d", m.Version, ManifestVersion)
	}
	h := &Handover{files: make(map[string]*os.File, len(m.Files)), state: m.State}
	for name, fd := range m.Files {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			h.Close()
			return nil, fmt.Errorf("the handed-over %s (descriptor %d) is not open: %w", name, fd, err)
		}
		syscall.CloseOnExec(fd)
		h.files[name] = os.NewFile(uintptr(fd), name)
	}
	return h, nil
}

// State decodes the handed-over state into v.
func (h *Handover) State(v any) error {
	if len(h.state) == 0 {
		return errors.New("no state was handed over")
	}
	return json.Unmarshal(h.state, v)
}

// File hands over the file name, once; nil if there is none.
func (h *Handover) File(name string) *os.File {
	f := h.files[name]
	delete(h.files, name)
	return f
}

// Listener hands over the listening socket name, once.
func (h *Handover) Listener(name string) (net.Listener, error) {
	f := h.File(name)
	if f == nil {
		return nil, fmt.Errorf("no %s was handed over", name)
	}
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("the handed-over %s is not a listening socket: %w", name, err)
	}
	return ln, nil
}

// Close closes what was not taken.
func (h *Handover) Close() {
	for name, f := range h.files {
		f.Close()
		delete(h.files, name)
	}
}
