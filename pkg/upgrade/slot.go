package upgrade

import (
	"fmt"
	"path/filepath"

	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

// Slot is one of the two sets of files an Envoy runs on, so that the
// serving and the next Envoy of a handover never share one: slot A is the
// bootstrap's own file and admin socket, slot B a copy beside them. Each
// handover moves to the other slot.
type Slot string

const (
	SlotA Slot = "a"
	SlotB Slot = "b"
)

// Next is the slot the next Envoy of a handover runs in.
func (s Slot) Next() Slot {
	if s == SlotB {
		return SlotA
	}
	return SlotB
}

// Slot B's files, in the work dir beside slot A's.
const (
	SlotBBootstrapFile = "bootstrap-handover.yaml"
	SlotBAdminSocket   = "zoneproxy-envoy-admin-handover.sock"
)

// Files are what an Envoy of one slot runs on: its bootstrap file (a name
// in the work dir) and its admin API.
type Files struct {
	Bootstrap string
	Admin     envoy.AdminAddress
}

// FilesOf are slot s's files, given slot A's: the bootstrap's own.
func (s Slot) FilesOf(a Files) (Files, error) {
	if s != SlotB {
		return a, nil
	}
	if a.Admin.Socket == "" {
		return a, fmt.Errorf("the bootstrap's admin API is on TCP %s, which a second Envoy cannot share; kuma-cp puts it on a Unix socket when the bootstrap request names a work dir, as zoneproxy's does", a.Admin.TCP)
	}
	return Files{Bootstrap: SlotBBootstrapFile, Admin: envoy.AdminAddress{Socket: filepath.Join(filepath.Dir(a.Admin.Socket), SlotBAdminSocket)}}, nil
}
