package cli

import (
	"errors"
	"fmt"

	yaml "go.yaml.in/yaml/v3"

	"github.com/zoneproxy/zoneproxy/pkg/kuma/token"
)

// maxConfigFile bounds a --config file: settings take a few KiB; the
// bound only keeps a runaway file from exhausting memory.
const maxConfigFile = 8 << 20

// readConfigFile reads a --config file as the token file is read: a
// regular file of bounded size, opened without blocking, so that a link
// to /dev/zero or a FIFO is an error rather than a crash or a hang.
func readConfigFile(path string) ([]byte, error) {
	raw, _, err := token.ReadRegular(path, maxConfigFile)
	return raw, err
}

// fileValues reads a config file's settings with every scalar as the
// text it is written as, as an environment variable gives it: YAML would
// make `release: 2.10` the number 2.1 and `build: 0755` the number 493,
// so a label or name would differ from the same value given in the
// environment. Typed settings convert that text as they do the
// environment's. A file that holds no settings gives nil.
func fileValues(raw []byte) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the file must be settings, one `key: value` per line", root.Line)
	}
	v, err := nodeValue(root)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

func nodeValue(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return nil, nil
		}
		return n.Value, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			v, err := nodeValue(e)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a key must be plain text", k.Line)
			}
			if _, dup := out[k.Value]; dup {
				return nil, fmt.Errorf("line %d: %q is set twice", k.Line, k.Value)
			}
			v, err := nodeValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			out[k.Value] = v
		}
		return out, nil
	case yaml.AliasNode:
		return nil, fmt.Errorf("line %d: aliases (*%s) are not supported here: write the value out", n.Line, n.Value)
	}
	return nil, errors.New("unexpected YAML")
}
