package main

import (
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

func TestRestartRowsJudgeTheResumeAndTheGaps(t *testing.T) {
	good := func(kind string) restartRun {
		at := time.Now()
		return restartRun{kind: kind, serving: 60 * time.Millisecond, resume: time.Second, accepted: 1, launches: 1, envoySame: true,
			disrupted: at, gaps: []controlplane.Gap{{From: at, To: at.Add(200 * time.Millisecond)}}}
	}
	result := func(rows []row, figure int) string { return rows[figure].Result }
	for _, tc := range []struct {
		name   string
		change func(r *restartRun)
		figure int // index in restartRows
		want   string
	}{
		{"all good", func(*restartRun) {}, 5, "PASS"},
		{"a second stream", func(r *restartRun) { r.accepted = 2 }, 5, "FAIL"},
		{"Envoy restarted", func(r *restartRun) { r.envoySame, r.launches = false, 2 }, 5, "FAIL"},
		{"slow resume", func(r *restartRun) { r.resume = 2100 * time.Millisecond }, 5, "FAIL"},
		{"a long gap", func(r *restartRun) { r.gaps[0].To = r.gaps[0].From.Add(1100 * time.Millisecond) }, 4, "FAIL"},
	} {
		bad := good(kindKill)
		tc.change(&bad)
		m := &measured{errs: map[string]error{}, restart: &restartResult{
			planned: []restartRun{good(kindPlanned), good(kindPlanned), good(kindPlanned)},
			killed:  []restartRun{good(kindKill), good(kindKill), bad},
		}}
		if got := result(m.restartRows(settings{}), tc.figure); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestEgressStopRowCountsRefusedAndResetConnections(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kinds []string
		want  string
	}{
		{"all served", []string{outcomeOK, outcomeOK}, "PASS"},
		{"one refused", []string{outcomeOK, outcomeRefused}, "FAIL"},
		{"one reset", []string{outcomeReset, outcomeOK}, "FAIL"},
	} {
		r := &egressStopResult{rate: 100, withdrew: true}
		for _, k := range tc.kinds {
			r.conns = append(r.conns, connOutcome{kind: k})
		}
		m := &measured{errs: map[string]error{}, egressStop: r}
		if got := m.egressStopRow(); got.Result != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got.Result, got.Median, tc.want)
		}
	}
}
