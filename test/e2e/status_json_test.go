package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/test/harness"
)

// A host with no instance configured is an answer, not a bad command
// line: an empty list, exit 0.
func TestStatusWithNoInstance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	code, out := harness.Run(t, bins.Zoneproxy, nil, "status", "--instance-dir", dir, "-o", "json")
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("status -o json with no instance: exit %d, %v\n%s", code, err, out)
	}
	if st.Schema != 1 || st.Instances == nil || len(st.Instances) != 0 || !strings.Contains(out, `"instances": []`) {
		t.Errorf("status -o json with no instance says:\n%s", out)
	}

	code, out = harness.Run(t, bins.Zoneproxy, nil, "status", "--instance-dir", dir)
	if code != 0 || !strings.Contains(out, "no instance: none is configured in "+dir) {
		t.Errorf("status with no instance: exit %d\n%s", code, out)
	}
}
