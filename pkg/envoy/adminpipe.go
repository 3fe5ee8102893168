package envoy

import (
	"errors"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/zoneproxy/zoneproxy/pkg/envoy/bootstrapdoc"
)

// WithAdminPipe is a copy of a JSON bootstrap whose admin API listens on the
// Unix socket path instead, for a second Envoy beside the first (a
// handover): each needs an admin of its own. Only an admin on a pipe is
// moved: a TCP admin port cannot be shared, and another port would not be
// where operators and kuma-cp look for it. All else is kept as written.
func WithAdminPipe(doc []byte, path string) ([]byte, AdminAddress, error) {
	root, err := bootstrapdoc.ParseObject(doc)
	if err != nil {
		return nil, AdminAddress{}, fmt.Errorf("the bootstrap is not a JSON object: %w", err)
	}
	admin := root.Object("admin")
	addr := &corev3.Address{}
	if _, err := admin.Decode("address", addr); err != nil || addr.GetPipe() == nil {
		return nil, AdminAddress{}, errors.New("the bootstrap's admin API is not on a Unix socket (admin.address.pipe): a second Envoy cannot have an admin API of its own beside the first")
	}
	addr.GetPipe().Path = path
	if err := admin.SetProto("address", addr); err != nil {
		return nil, AdminAddress{}, err
	}
	root.Set("admin", admin.JSON())
	return root.JSON(), AdminAddress{Socket: path}, nil
}
