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

func TestUpgradeRowsJudgeEachPhaseAndTheEnvoyPID(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	good := func() *upgradeResult {
		r := &upgradeResult{rate: 100, envoyPID: 7, envoyLaunches: 1, envoyRanOn: true, reloadsFrom: at(0)}
		for range 3 {
			r.reloads = append(r.reloads, reloadRun{serving: 70 * time.Millisecond, envoyPID: 7})
			r.handovers = append(r.handovers, handoverRun{took: 80 * time.Millisecond, oldExit: time.Second})
		}
		return r
	}
	// The load's connections split at the first handover's request (+2 s).
	conns := []connOutcome{{at: at(-1), kind: outcomeOK}, {at: at(1), kind: outcomeOK}, {at: at(3), kind: outcomeOK}}
	withConns := func(r *upgradeResult, cs []connOutcome) {
		r.reloadLoad = loadWindowOf(cs, nil, at(-2), at(2))
		r.handoverLoad = loadWindowOf(cs, []time.Time{at(2.5)}, at(2), at(4))
	}
	for _, tc := range []struct {
		name   string
		change func(r *upgradeResult)
		fails  []int // rows of upgradeRows that fail
	}{
		{"all good", func(r *upgradeResult) { withConns(r, conns) }, nil},
		{"a reset during a reload", func(r *upgradeResult) {
			withConns(r, append(append([]connOutcome(nil), conns...), connOutcome{at: at(0.5), kind: outcomeReset}))
		}, []int{0}},
		{"a refusal during a handover", func(r *upgradeResult) {
			withConns(r, append(append([]connOutcome(nil), conns...), connOutcome{at: at(2), kind: outcomeRefused}))
		}, []int{1}},
		{"a slow reload", func(r *upgradeResult) {
			withConns(r, conns)
			for i := range r.reloads {
				r.reloads[i].serving = 1100 * time.Millisecond
			}
		}, []int{2}},
		{"Envoy replaced by a reload", func(r *upgradeResult) { withConns(r, conns); r.reloads[1].envoyPID = 8 }, []int{4}},
		{"a second Envoy launched", func(r *upgradeResult) { withConns(r, conns); r.envoyLaunches = 2 }, []int{4}},
	} {
		r := good()
		tc.change(r)
		m := &measured{errs: map[string]error{}, upgrade: r}
		rows := m.upgradeRows(settings{egressRate: 100, upgradeReloads: 3, upgradeHandovers: 3})
		for i, rw := range rows {
			want := "PASS"
			for _, f := range tc.fails {
				if f == i {
					want = "FAIL"
				}
			}
			if rw.Result != want {
				t.Errorf("%s: %q is %s, want %s (%s)", tc.name, rw.Figure, rw.Result, want, rw.Note)
			}
		}
	}
	r := good()
	withConns(r, conns)
	if len(r.reloadLoad.conns) != 2 || len(r.handoverLoad.conns) != 1 || len(r.reloadLoad.noEgress) != 0 || len(r.handoverLoad.noEgress) != 1 {
		t.Errorf("windows: reloads %+v, handovers %+v", r.reloadLoad, r.handoverLoad)
	}
}
