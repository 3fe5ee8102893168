// Package upgrade holds what changes a zone proxy's programs in place: a
// reload (the agent re-execs a new program in its process, Envoy stays its
// child) and an Envoy handover (a new Envoy beside the serving one). It
// says what a reload refuses and why, what is handed over, carried and
// adopted, and runs an Envoy handover; the agent decides when.
package upgrade

import (
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/xds"
)

// Version changes when State's meaning does. The check before a reload
// (`run --handover-check`) prints the version the new binary reads; a
// reload to a binary that reads another is refused.
const Version = 1

// State is what an agent hands its next program besides the open files
// (HandedFiles): nothing secret, since /proc shows it to the same user.
type State struct {
	Version int `json:"version"`
	// Generation is the handing-over program's: the next one is one more.
	Generation      int `json:"generation"`
	EnvoyGeneration int `json:"envoyGeneration"`
	// WorkDir is the work dir's path; Temporary: the agent made it.
	WorkDir   string `json:"workDir"`
	Temporary bool   `json:"temporary,omitempty"`
	StateDir  string `json:"stateDir,omitempty"`
	// Envoy is the running Envoy, nil while waiting for the mesh or the
	// control plane: the next program then starts over.
	Envoy *EnvoyState `json:"envoy,omitempty"`
	// Reloads counts reloads by result, carried so that the counter of
	// reloads goes on across them.
	Reloads map[string]float64 `json:"reloads,omitempty"`
	// Handovers counts Envoy handovers by result, carried the same way.
	Handovers map[string]float64 `json:"handovers,omitempty"`
}

// EnvoyState is the running Envoy, handed over.
type EnvoyState struct {
	PID     int           `json:"pid"`
	Path    string        `json:"path"`
	Version envoy.Version `json:"version"`
	// Relayed: Envoy's xDS goes through the agent; Resume says how the
	// relay reached the control plane.
	Relayed bool            `json:"relayed"`
	Resume  *xds.Resumption `json:"resume,omitempty"`
	// HandoverGeneration is the running Envoy's in the Envoy handovers'
	// count: 1 for the first, one more with each handover.
	HandoverGeneration int64 `json:"handoverGeneration,omitempty"`
	// Slot is the files the running Envoy runs on. Programs before slots
	// wrote none: they ran even handover generations in slot B, and read
	// the slot so from what this program writes, since the two alternate
	// together.
	Slot Slot `json:"slot,omitempty"`
	// Launch is the launch settings the running Envoy was started with:
	// the next program hands over to a new Envoy when its own differ.
	// Absent from programs that refused such reloads.
	Launch map[string]string `json:"launch,omitempty"`
}

// Place is the handed-over Envoy's place in the handovers; generation 1
// in slot A for an Envoy of a build that kept none.
func (e *EnvoyState) Place() Place {
	p := Place{Generation: max(e.HandoverGeneration, 1), Slot: e.Slot}
	if p.Slot == "" {
		// Written by a program before slots, which ran even generations
		// in slot B.
		p.Slot = SlotA
		if p.Generation%2 == 0 {
			p.Slot = SlotB
		}
	}
	return p
}

// Names of the handed-over files.
const (
	FileWorkDir     = "work-dir"
	FileWorkLock    = "work-dir-lock"
	FileStateDir    = "state-dir"
	FileStateLock   = "state-dir-lock"
	FileRelay       = "relay-socket"
	FileAccessLog   = "access-log-fifo"
	FileMeshMetric  = "meshmetric-socket"
	FileEnvoyOutput = "envoy-output"
	// The loopback server's and the extra listeners' are named by their
	// flag, e.g. "--readiness-port".
)
