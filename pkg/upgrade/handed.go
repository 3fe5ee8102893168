package upgrade

import (
	"errors"
	"fmt"
	"net"
	"os"
)

// HandedFile is a file to hand over; Dup marks one made for the handover,
// closed if it fails.
type HandedFile struct {
	F   *os.File
	Dup bool
}

// HandedFiles are the files handed over, by name.
type HandedFiles map[string]HandedFile

// CloseDups closes the files made for the handover.
func (fs HandedFiles) CloseDups() {
	for _, h := range fs {
		if h.Dup {
			h.F.Close()
		}
	}
}

// Open are the files as reexec.Exec hands them over.
func (fs HandedFiles) Open() map[string]*os.File {
	out := make(map[string]*os.File, len(fs))
	for name, h := range fs {
		out[name] = h.F
	}
	return out
}

// Dir is a locked directory: its path, and open descriptors of it and of
// its lock.
type Dir struct {
	Path       string
	File, Lock *os.File
}

// Holdings are what this program holds that the next one takes over.
type Holdings struct {
	Generation, EnvoyGeneration int
	WorkDir                     Dir
	// TemporaryWorkDir: the agent made the work dir.
	TemporaryWorkDir bool
	StateDir         *Dir // nil: none
	// Listeners are the agent's own, by their flag.
	Listeners          map[string]net.Listener
	Reloads, Handovers map[string]float64
	// Envoy is the running Envoy, nil when there is none to hand over.
	Envoy *HeldEnvoy
}

// HeldEnvoy is the running Envoy and what it uses.
type HeldEnvoy struct {
	// State says what the Envoy is.
	State EnvoyState
	// Output is the pipe Envoy writes its log to; nil: none to hand over.
	Output *os.File
	// Relay is the relay's socket Envoy reconnects to when State.Relayed.
	Relay net.Listener
	// AccessLog is the access log FIFO and MeshMetric the socket of its
	// server; MeshMetric nil when observability is off.
	AccessLog  *os.File
	MeshMetric func() (*os.File, error)
	// Flush writes the last-known-good cache out, so that the new program
	// serves Envoy the configuration it holds, bounded in time; nil for no
	// cache.
	Flush func() error
}

// Gather is the state and the files a reload hands over.
func Gather(h Holdings) (*State, HandedFiles, error) {
	files := HandedFiles{}
	fail := func(err error) (*State, HandedFiles, error) {
		files.CloseDups()
		return nil, nil, err
	}
	st := &State{Version: Version, Generation: h.Generation, EnvoyGeneration: h.EnvoyGeneration,
		WorkDir: h.WorkDir.Path, Temporary: h.TemporaryWorkDir, Reloads: h.Reloads, Handovers: h.Handovers}
	files[FileWorkDir] = HandedFile{F: h.WorkDir.File}
	files[FileWorkLock] = HandedFile{F: h.WorkDir.Lock}
	if sd := h.StateDir; sd != nil {
		st.StateDir = sd.Path
		files[FileStateDir] = HandedFile{F: sd.File}
		files[FileStateLock] = HandedFile{F: sd.Lock}
	}
	for name, ln := range h.Listeners {
		f, err := ListenerFile(ln)
		if err != nil {
			return fail(fmt.Errorf("cannot hand over the %s listener: %w", name, err))
		}
		files[name] = HandedFile{F: f, Dup: true}
	}
	e := h.Envoy
	if e == nil {
		return st, files, nil
	}
	if e.Output == nil {
		return fail(errors.New("Envoy's output cannot be handed over"))
	}
	files[FileEnvoyOutput] = HandedFile{F: e.Output}
	es := e.State
	if es.Relayed {
		f, err := ListenerFile(e.Relay)
		if err != nil {
			return fail(fmt.Errorf("cannot hand over the relay's socket: %w", err))
		}
		files[FileRelay] = HandedFile{F: f, Dup: true}
	}
	if e.MeshMetric != nil {
		files[FileAccessLog] = HandedFile{F: e.AccessLog}
		f, err := e.MeshMetric()
		if err != nil {
			return fail(fmt.Errorf("cannot hand over the MeshMetric socket: %w", err))
		}
		files[FileMeshMetric] = HandedFile{F: f, Dup: true}
	}
	st.Envoy = &es
	if e.Flush != nil && es.Relayed {
		if err := e.Flush(); err != nil {
			return fail(fmt.Errorf("the last-known-good configuration the new program would serve Envoy cannot be written: %w", err))
		}
	}
	return st, files, nil
}

// ListenerFile is a duplicate of ln's socket.
func ListenerFile(ln net.Listener) (*os.File, error) {
	fl, ok := ln.(interface{ File() (*os.File, error) })
	if !ok || ln == nil {
		return nil, errors.New("not a socket")
	}
	return fl.File()
}
