package xds

import (
	"bytes"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/zoneproxy/zoneproxy/pkg/envoy/bootstrapdoc"
	"github.com/zoneproxy/zoneproxy/pkg/xds/bootstraprewrite"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// Rewrite is what Start gives Envoy for doc, the control plane's
// bootstrap, with the relay on socketPath: the bootstrap a new Envoy would
// run with, and where the relay would go for it.
func Rewrite(doc []byte, socketPath string) ([]byte, cpdial.Target, error) {
	res, err := bootstraprewrite.Rewrite(doc, socketPath)
	if err != nil {
		return nil, cpdial.Target{}, err
	}
	return res.JSON, res.Upstream, nil
}

// BootstrapChanges names the top-level sections in which two bootstraps
// differ (node, layeredRuntime, …), nil when they are the same. The
// fields at the paths in ignore (node.metadata keys) do not count: the
// agent's own build, which kuma-cp shows and Envoy does not read, so that
// an upgrade of the agent alone does not replace Envoy. The node is
// compared as a proto, every other section as JSON with sorted keys.
func BootstrapChanges(running, next []byte, ignore ...[]string) ([]string, error) {
	a, err := bootstrapdoc.Parse(running)
	if err != nil {
		return nil, fmt.Errorf("the running Envoy's bootstrap: %w", err)
	}
	b, err := bootstrapdoc.Parse(next)
	if err != nil {
		return nil, fmt.Errorf("the new bootstrap: %w", err)
	}
	nodesEqual, err := sameNode(a, b, ignore)
	if err != nil {
		return nil, err
	}
	var changed []string
	for _, m := range a.Members() {
		same := bytes.Equal(m.Raw, b.Raw(m.Name))
		if m.Name == "node" {
			same = nodesEqual
		}
		if !same {
			changed = append(changed, m.Name)
		}
	}
	for _, m := range b.Members() {
		if a.Raw(m.Name) == nil && !(m.Name == "node" && nodesEqual) {
			changed = append(changed, m.Name)
		}
	}
	return changed, nil
}

// sameNode compares the nodes without the ignored metadata; no node is
// the same as one that held only those.
func sameNode(a, b *bootstrapdoc.Object, ignore [][]string) (bool, error) {
	var nodes [2]*corev3.Node
	for i, doc := range []*bootstrapdoc.Object{a, b} {
		nodes[i] = &corev3.Node{}
		if _, err := doc.Decode("node", nodes[i]); err != nil {
			return false, fmt.Errorf("the bootstrap's %w", err)
		}
		for _, path := range ignore {
			if err := withoutMetadata(doc, nodes[i], path); err != nil {
				return false, err
			}
		}
	}
	return proto.Equal(nodes[0], nodes[1]), nil
}

// withoutMetadata removes the node metadata at path (node, metadata, key,
// …), and the structs on the way that it leaves empty.
func withoutMetadata(doc *bootstrapdoc.Object, node *corev3.Node, path []string) error {
	if len(path) < 3 || path[0] != "node" || path[1] != "metadata" {
		if len(path) > 0 && doc.Raw(path[0]) != nil {
			return fmt.Errorf("cannot leave %v out of the comparison: only node.metadata keys can be", path)
		}
		return nil
	}
	if deleteKey(node.GetMetadata(), path[2:]) {
		node.Metadata = nil
	}
	return nil
}

// deleteKey deletes the value at path in s and reports whether s is left
// empty.
func deleteKey(s *structpb.Struct, path []string) bool {
	if s == nil {
		return false
	}
	if len(path) > 1 {
		if !deleteKey(s.Fields[path[0]].GetStructValue(), path[1:]) {
			return false
		}
	}
	delete(s.Fields, path[0])
	return len(s.Fields) == 0
}
