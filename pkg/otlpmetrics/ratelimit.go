package otlpmetrics

import (
	"time"

	"go.uber.org/zap"
)

// warnEvery keeps a missing collector from filling the log.
const warnEvery = time.Minute

// rateLimited logs the first warning, then at most one per warnEvery with
// the number left out in between.
type rateLimited struct {
	last       time.Time
	suppressed int
}

func (r *rateLimited) log(l *zap.Logger, msg string, fields ...zap.Field) {
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < warnEvery {
		r.suppressed++
		return
	}
	if r.suppressed > 0 {
		fields = append(fields, zap.Int("suppressed", r.suppressed))
	}
	l.Warn(msg, fields...)
	r.last, r.suppressed = now, 0
}
