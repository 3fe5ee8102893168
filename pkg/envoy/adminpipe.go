package envoy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// WithAdminPipe is a copy of a JSON bootstrap whose admin API listens on the
// Unix socket path instead, for a second Envoy beside the first (a
// handover): each needs an admin of its own. Only an admin on a pipe is
// moved: a TCP admin port cannot be shared, and another port would not be
// where operators and kuma-cp look for it.
func WithAdminPipe(doc []byte, path string) ([]byte, AdminAddress, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber() // numbers kept as written
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return nil, AdminAddress{}, fmt.Errorf("the bootstrap is not a JSON object: %w", err)
	}
	admin, _ := root["admin"].(map[string]any)
	addr, _ := admin["address"].(map[string]any)
	pipe, _ := addr["pipe"].(map[string]any)
	if pipe == nil {
		return nil, AdminAddress{}, errors.New("the bootstrap's admin API is not on a Unix socket (admin.address.pipe): a second Envoy cannot have an admin API of its own beside the first")
	}
	pipe["path"] = path
	out, err := json.Marshal(root) // sorted keys: "admin" first, as the relay writes it
	if err != nil {
		return nil, AdminAddress{}, err
	}
	return out, AdminAddress{Socket: path}, nil
}
