package cli

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// loggingHandler reads (GET) or changes (POST ?level=…, ?envoy=…) the
// agent's and Envoy's log levels at runtime.
func loggingHandler(level zap.AtomicLevel, running *atomic.Pointer[runningEnvoy], log *zap.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		q := r.URL.Query()
		if r.Method == http.MethodPost {
			if l := q.Get("level"); l != "" {
				lvl, err := zapcore.ParseLevel(l)
				if err != nil || lvl > zapcore.ErrorLevel {
					http.Error(w, fmt.Sprintf("level %q: use debug, info, warn or error", l), http.StatusBadRequest)
					return
				}
				level.SetLevel(lvl)
				log.Info("log level changed", zap.String("level", lvl.String()))
			}
			if l := q.Get("envoy"); l != "" {
				re := running.Load()
				if re == nil {
					http.Error(w, "Envoy is not running yet", http.StatusServiceUnavailable)
					return
				}
				ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
				defer cancel()
				if err := re.admin.SetLogLevel(ctx, envoyLevel(l)); err != nil {
					http.Error(w, "Envoy refused the level: "+err.Error(), http.StatusBadGateway)
					return
				}
				log.Info("Envoy log level changed", zap.String("level", envoyLevel(l)))
			}
		} else if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "use GET to read, POST ?level=debug or ?envoy=debug to change", http.StatusMethodNotAllowed)
			return
		}
		fmt.Fprintf(w, "zoneproxy: %s\n", level.Level())
	})
}

// envoyLevel maps the agent's level names to Envoy's.
func envoyLevel(l string) string {
	if l == "warn" {
		return "warning"
	}
	return l
}
