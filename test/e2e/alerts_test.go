package e2e

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
)

// alertsFile is the example Prometheus alert rules; `make alerts-test`
// checks them with promtool.
const alertsFile = examplesDir + "/prometheus/alerts.yaml"

var alertMetric = regexp.MustCompile(`\bzoneproxy_[a-z0-9_]+\b`)

// The example alert rules read metrics a running agent serves: a renamed
// metric fails here, not silently in an operator's Prometheus. A metric is
// on a ready agent's page, or declared in pkg/ by its quoted name (a
// counter by label shows only once counted, e.g. a rejection).
func TestAlertRulesReadServedMetrics(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	_, p, _ := readyEgress(t, nil)
	_, page := get(t, "http://127.0.0.1:"+strconv.Itoa(p.Readiness)+"/metrics")
	src := productSource(t)
	// Who the proxy is, and when its token expires (the test tokens do).
	for _, want := range []string{`zoneproxy_info{mesh="payments",name="zone-proxy-payments-egress-`, "\nzoneproxy_token_expiry_timestamp_seconds "} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	served := func(name string) bool {
		return strings.Contains(page, "\n"+name+" ") || strings.Contains(page, "\n"+name+"{") || strings.Contains(src, `"`+name+`"`)
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			for _, name := range alertMetric.FindAllString(r.Expr, -1) {
				if !served(name) {
					t.Errorf("%s: %s is not a metric of the agent (not on its page, not declared in pkg/)", r.Alert, name)
				}
			}
		}
	}
	if n < 5 {
		t.Fatalf("%d rules in %s", n, alertsFile)
	}
}

// productSource is every non-test Go file under pkg/.
func productSource(t *testing.T) string { return testutil.ProductSource(t, "../../pkg") }
