package cli

import (
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/kuma/dataplane"
)

// Every problem in a MeshZoneAddress is reported under the setting the
// operator can change.
func TestMeshZoneAddressProblemsNameASetting(t *testing.T) {
	for _, m := range []dataplane.MeshZoneAddress{{}, {Address: "0.0.0.0", Port: 70000}} {
		for _, fe := range m.Validate() {
			if _, ok := mzaSettings[fe.Field]; !ok {
				t.Errorf("field %s (%s) maps to no setting", fe.Field, fe.Message)
			}
		}
	}
}
