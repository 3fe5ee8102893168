package main

// restartResult is the restart figure: planned restarts, then SIGKILLs,
// of one zone egress with a warm cache.
type restartResult struct {
	planned, killed []restartRun
}

// restartFigure warms a zone egress of mesh payments, then restarts it
// b.s.restartRuns times with SIGTERM and as many with SIGKILL, each time
// following it to live configuration before the next.
func (b *bed) restartFigure() (restartResult, error) {
	var res restartResult
	p, err := b.newEgress("payments", "bench-restart")
	if err != nil {
		return res, err
	}
	a, err := b.startWarm(p)
	if err != nil {
		return res, err
	}
	defer func() { a.kill() }()
	if res.planned, err = b.restartSeries(&a, p, kindPlanned, b.s.restartRuns); err != nil {
		return res, err
	}
	res.killed, err = b.restartSeries(&a, p, kindKill, b.s.restartRuns)
	return res, err
}
