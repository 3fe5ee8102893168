package agent

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
)

// loggingHandler reads (GET) or changes (POST ?level=…, ?envoy=…) the
// agent's and Envoy's log levels at runtime. Both values are checked before
// either is applied, so a bad request changes nothing.
func loggingHandler(level zap.AtomicLevel, envoyNow func() *supervise.Current, log *zap.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if r.Method != http.MethodPost {
			if r.Method != http.MethodGet {
				w.Header().Set("Allow", "GET, POST")
				http.Error(w, "use GET to read, POST ?level=debug or ?envoy=debug (or ?envoy=<component>:<level>) to change", http.StatusMethodNotAllowed)
				return
			}
			fmt.Fprintf(w, "zoneproxy: %s\n", level.Level())
			return
		}
		q := r.URL.Query()
		var agentLevel *zapcore.Level
		if l := q.Get("level"); l != "" {
			lvl, err := zapcore.ParseLevel(l)
			if err != nil || lvl > zapcore.ErrorLevel || !slices.Contains(config.LogLevels, l) {
				http.Error(w, fmt.Sprintf("level %q: use debug, info, warn or error", l), http.StatusBadRequest)
				return
			}
			agentLevel = &lvl
		}
		var component, envoyLvl string
		if e := q.Get("envoy"); e != "" {
			var err error
			if component, envoyLvl, err = parseEnvoyLevel(e); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		if envoyLvl != "" {
			re := envoyNow()
			if re == nil {
				http.Error(w, "Envoy is not running yet", http.StatusServiceUnavailable)
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
			defer cancel()
			if err := re.Admin.SetLogLevel(ctx, component, envoyLvl); err != nil {
				http.Error(w, "Envoy refused the level: "+err.Error(), http.StatusBadGateway)
				return
			}
			log.Info("Envoy log level changed", zap.String("level", envoyLvl), zap.String("component", component))
		}
		if agentLevel != nil {
			level.SetLevel(*agentLevel)
			log.Info("log level changed", zap.String("level", agentLevel.String()))
		}
		fmt.Fprintf(w, "zoneproxy: %s\n", level.Level())
	})
}

// parseEnvoyLevel accepts `<level>` or `<component>:<level>` with Envoy's
// level names; anything else would reach Envoy's admin query.
func parseEnvoyLevel(v string) (component, level string, err error) {
	level = v
	if c, l, ok := strings.Cut(v, ":"); ok {
		if !config.ValidEnvoyLoggerName(c) {
			return "", "", fmt.Errorf("envoy=%q: %q is not an Envoy logger name (lower-case letters, digits and _)", v, c)
		}
		component, level = c, l
	}
	if level == "warn" {
		level = "warning"
	}
	if !slices.Contains(config.EnvoyLogLevels, level) {
		return "", "", fmt.Errorf("envoy=%q: use one of %s, optionally as <component>:<level>", v, strings.Join(config.EnvoyLogLevels, ", "))
	}
	return component, level, nil
}
