package bootstrap

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/zoneproxy/zoneproxy/pkg/version"
)

// SetAgentBuild writes this build at every AgentBuildFields path, as the
// request describes it, with the Kuma version of the control plane's own
// line (2.14 serves SotW, 3.0 delta), and leaves the rest of the metadata
// alone.
func TestSetAgentBuildWritesWhereTheBootstrapCarriesIt(t *testing.T) {
	for _, delta := range []bool{false, true} {
		testSetAgentBuild(t, delta)
	}
}

func testSetAgentBuild(t *testing.T, delta bool) {
	for name, md := range map[string]*structpb.Struct{
		"an older agent's node": mustStruct(t, map[string]any{
			"version":         map[string]any{"kumaDp": map[string]any{"version": "2.0.0", "gitTag": "zoneproxy-old"}, "envoy": map[string]any{"version": "1.39.0"}},
			"dynamicMetadata": map[string]any{dependencyVersionKey: "old", "other": "kept"},
			"workdir":         "/run/zoneproxy/zp",
		}),
		"a node without them": {},
	} {
		t.Run(name, func(t *testing.T) {
			SetAgentBuild(md, delta)
			for _, path := range AgentBuildFields { // node.metadata.…
				if path[0] != "node" || path[1] != "metadata" {
					t.Fatalf("%v is not in the node's metadata", path)
				}
				v := md.Fields[path[2]]
				for _, k := range path[3:] {
					v = v.GetStructValue().GetFields()[k]
				}
				if v == nil {
					t.Fatalf("nothing at %v: %v", path, md)
				}
			}
			fields := md.Fields
			want := agentBuild(version.ForADS(delta))
			if wantKuma := map[bool]string{false: "2.14.3", true: "3.0.0"}[delta]; want.Version != wantKuma {
				t.Fatalf("delta ADS %v: the control plane is told Kuma %s, want %s", delta, want.Version, wantKuma)
			}
			kd := fields["version"].GetStructValue().GetFields()["kumaDp"].GetStructValue().GetFields()
			if kd["version"].GetStringValue() != want.Version || kd["gitTag"].GetStringValue() != want.GitTag {
				t.Errorf("version.kumaDp %v, want %+v", kd, want)
			}
			if got := fields["dynamicMetadata"].GetStructValue().GetFields()[dependencyVersionKey].GetStringValue(); got != version.Version {
				t.Errorf("dynamicMetadata %s %q, want %q", dependencyVersionKey, got, version.Version)
			}
			if name == "an older agent's node" {
				if fields["workdir"].GetStringValue() != "/run/zoneproxy/zp" || fields["version"].GetStructValue().GetFields()["envoy"] == nil ||
					fields["dynamicMetadata"].GetStructValue().GetFields()["other"].GetStringValue() != "kept" {
					t.Errorf("the rest of the metadata changed: %v", md)
				}
			}
		})
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
