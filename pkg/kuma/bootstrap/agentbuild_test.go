package bootstrap

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/zoneproxy/zoneproxy/pkg/version"
)

// SetAgentBuild writes this build at every AgentBuildFields path, as the
// request describes it, and leaves the rest of the metadata alone.
func TestSetAgentBuildWritesWhereTheBootstrapCarriesIt(t *testing.T) {
	for name, md := range map[string]*structpb.Struct{
		"an older agent's node": mustStruct(t, map[string]any{
			"version":         map[string]any{"kumaDp": map[string]any{"version": "2.0.0", "gitTag": "zoneproxy-old"}, "envoy": map[string]any{"version": "1.39.0"}},
			"dynamicMetadata": map[string]any{dependencyVersionKey: "old", "other": "kept"},
			"workdir":         "/run/zoneproxy/zp",
		}),
		"a node without them": {},
	} {
		t.Run(name, func(t *testing.T) {
			SetAgentBuild(md)
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
			want := agentBuild()
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
