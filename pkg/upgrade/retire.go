package upgrade

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Retirements are the old Envoys of handovers while they drain.
type Retirements struct {
	wg       sync.WaitGroup
	draining atomic.Int32 // the old Envoy's pid while it drains
	quitOnce sync.Once
	quit     chan struct{}
	initOnce sync.Once
}

func (r *Retirements) init() { r.initOnce.Do(func() { r.quit = make(chan struct{}) }) }

// Draining is the pid of the old Envoy that drains, 0 for none.
func (r *Retirements) Draining() int {
	if r == nil {
		return 0
	}
	return int(r.draining.Load())
}

// Old is an Envoy that a new one took over from.
type Old struct {
	Admin interface {
		DrainListeners(ctx context.Context) error
		StopListeners(ctx context.Context) error
	}
	Proc Process
	// Deadline is its drain's end.
	Deadline time.Time
	// Await waits out the drain (as a stop does), cut short once cut is
	// closed, and says how it ended.
	Await func(ctx context.Context, cut <-chan struct{}) string
	// Grace is between SIGTERM and SIGKILL.
	Grace time.Duration
	// Skip closes on a second stop signal: skip the rest of the drain.
	Skip <-chan struct{}
	Log  *zap.Logger
}

// Retire stops the old Envoy's listeners (new connections go to the new
// Envoy), waits out the drain as a stop does, and ends it, in the
// background. Its health checks do not fail: /ready answers for the new
// Envoy.
func (r *Retirements) Retire(o Old) {
	r.init()
	r.draining.Store(int32(o.Proc.PID()))
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.draining.Store(0)
		r.retire(o)
	}()
}

func (r *Retirements) retire(o Old) {
	ctx, cancel := context.WithDeadline(context.Background(), o.Deadline.Add(time.Second))
	defer cancel()
	if err := o.Admin.DrainListeners(ctx); err != nil {
		o.Log.Warn("Envoy handover: cannot start the old Envoy's drain", zap.Error(err))
	}
	if err := o.Admin.StopListeners(ctx); err != nil {
		o.Log.Warn("Envoy handover: cannot close the old Envoy's listeners; they close at the end of its drain time", zap.Error(err))
	}
	cut := make(chan struct{})
	go func() {
		select {
		case <-r.quit:
		case <-o.Skip:
		case <-ctx.Done():
		}
		close(cut)
	}()
	end := o.Await(ctx, cut)
	if o.Proc.Stop(o.Grace) {
		o.Log.Warn("the old Envoy ignored SIGTERM; killed it", zap.Duration("after", o.Grace))
	}
	if c, ok := o.Admin.(interface{ Close() }); ok {
		c.Close()
	}
	o.Log.Info("the old Envoy exited after its drain", zap.String("drain", end), zap.String("status", o.Proc.ExitDescription()))
}

// End ends the old Envoys still draining, at once, and waits for them:
// the agent stops.
func (r *Retirements) End() {
	r.init()
	r.quitOnce.Do(func() { close(r.quit) })
	r.wg.Wait()
}
