package main

import "github.com/zoneproxy/zoneproxy/test/controlplane"

// hungFigure warms a zone egress of mesh payments, then b.s.hungRuns
// times: the control plane hangs (accepts TCP, answers nothing), the
// agent is SIGKILLed and started again; once its /ready answers 200 the
// fault is cleared and the run follows it to live configuration.
func (b *bed) hungFigure() ([]restartRun, error) {
	p, err := b.newEgress("payments", "bench-hung")
	if err != nil {
		return nil, err
	}
	a, err := b.startWarm(p)
	if err != nil {
		return nil, err
	}
	defer func() { a.kill() }()
	defer b.cp.SetFaults(controlplane.Faults{})
	return b.restartSeries(&a, p, kindHung, b.s.hungRuns)
}
