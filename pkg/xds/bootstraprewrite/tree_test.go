package bootstraprewrite

import (
	"encoding/json"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// tree is a bootstrap as generic JSON values, for tests to look into and
// to build variants of the control plane's bootstrap. Keys are camelCase,
// as the control plane writes them.
type tree map[string]any

func parseTree(t testing.TB, doc []byte) tree {
	t.Helper()
	var root map[string]any
	if err := yaml.Unmarshal(doc, &root); err != nil {
		t.Fatal(err)
	}
	// Through JSON: what yaml.v3 reads as map[any]any becomes a string-keyed map.
	js, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	var out tree
	if err := json.Unmarshal(js, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (m tree) obj(path ...string) tree {
	cur := map[string]any(m)
	for _, p := range path {
		next, _ := cur[p].(map[string]any)
		if next == nil {
			return nil
		}
		cur = next
	}
	return cur
}

func (m tree) list(path ...string) []any {
	l, _ := m.obj(path[:len(path)-1]...)[path[len(path)-1]].([]any)
	return l
}

func (m tree) str(path ...string) string {
	s, _ := m.obj(path[:len(path)-1]...)[path[len(path)-1]].(string)
	return s
}

func (m tree) staticCluster(name string) tree {
	for _, c := range m.list("staticResources", "clusters") {
		if co, ok := c.(map[string]any); ok && co["name"] == name {
			return co
		}
	}
	return nil
}
