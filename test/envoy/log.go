package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

type level int

const (
	lvlTrace level = iota
	lvlDebug
	lvlInfo
	lvlWarn
	lvlError
	lvlCritical
	lvlOff
)

// spdlog's level names, as Envoy prints and accepts them.
var levelNames = []string{"trace", "debug", "info", "warning", "error", "critical", "off"}

func (l level) String() string { return levelNames[l] }

// Envoy's logger ids (source/common/common/logger.h), in registry order.
var componentNames = []string{
	"admin", "alternate_protocols_cache", "assert", "aws", "backtrace", "basic_auth", "cache_filter",
	"client", "config", "connection", "conn_handler", "compression", "credential_injector",
	"decompression", "dns", "dubbo", "envoy_bug", "ext_authz", "ext_proc", "file", "filter",
	"forward_proxy", "geolocation", "golang", "grpc", "happy_eyeballs", "hc", "health_checker",
	"http", "http2", "hystrix", "init", "io", "jwt", "kafka", "key_value_store", "lua", "main",
	"matcher", "misc", "mongo", "multi_connection", "oauth2", "pool", "quic", "quic_stream",
	"rate_limit_quota", "rbac", "rds", "redis", "rocketmq", "router", "runtime", "secret",
	"stateful_session", "stats", "tap", "testing", "thrift", "tracing", "udp", "upstream", "wasm",
	"websocket",
}

func isComponent(name string) bool {
	for _, c := range componentNames {
		if c == name {
			return true
		}
	}
	return false
}

type logger struct {
	mu      sync.Mutex
	out     io.Writer
	levels  map[string]level
	format  string
	escaped bool
	pid     int
}

func newLogger(out io.Writer, o *options) *logger {
	l := &logger{out: out, levels: map[string]level{}, format: o.logFormat, escaped: o.logFormatEscaped, pid: os.Getpid()}
	for _, c := range componentNames {
		l.levels[c] = o.logLevel
	}
	for _, cl := range o.componentLevels {
		l.levels[cl.name] = cl.level
	}
	return l
}

func (l *logger) enabled(lv level, comp string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.levels[comp]
	if !ok {
		cur = l.levels["misc"]
	}
	return lv != lvlOff && lv >= cur
}

// logf writes one line; src is "path/file.cc:line" like Envoy's %g:%#.
func (l *logger) logf(lv level, comp, src, format string, args ...any) {
	if !l.enabled(lv, comp) {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if l.escaped {
		msg = strconv.Quote(msg)
		msg = msg[1 : len(msg)-1]
	}
	line := l.render(time.Now(), lv, comp, src, msg)
	l.mu.Lock()
	io.WriteString(l.out, line+"\n")
	l.mu.Unlock()
}

func (l *logger) setAll(lv level) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.levels {
		l.levels[c] = lv
	}
}

func (l *logger) set(comp string, lv level) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.levels[comp] = lv
}

func (l *logger) activeText() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	b.WriteString("active loggers:\n")
	names := append([]string(nil), componentNames...)
	sort.Strings(names)
	for _, c := range names {
		fmt.Fprintf(&b, "  %s: %s\n", c, l.levels[c])
	}
	b.WriteString("\n")
	return b.String()
}

// render interprets the spdlog pattern flags Envoy users rely on.
func (l *logger) render(t time.Time, lv level, comp, src, msg string) string {
	file, line, _ := strings.Cut(src, ":")
	f := l.format
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'e':
			fmt.Fprintf(&b, "%03d", t.Nanosecond()/1e6)
		case 'f':
			fmt.Fprintf(&b, "%06d", t.Nanosecond()/1e3)
		case 'F':
			fmt.Fprintf(&b, "%09d", t.Nanosecond())
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'z':
			b.WriteString(t.Format("-07:00"))
		case 't', 'P':
			b.WriteString(strconv.Itoa(l.pid))
		case 'l':
			b.WriteString(lv.String())
		case 'L':
			b.WriteString(strings.ToUpper(lv.String()[:1]))
		case 'n':
			b.WriteString(comp)
		case 'v':
			b.WriteString(msg)
		case 'j':
			q := strconv.Quote(msg)
			b.WriteString(q[1 : len(q)-1])
		case 'g':
			b.WriteString(file)
		case 's':
			b.WriteString(file[strings.LastIndex(file, "/")+1:])
		case '#':
			b.WriteString(line)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}

// Shorthands with Envoy's component and a plausible source location.
func (l *logger) main(lv level, format string, args ...any) {
	l.logf(lv, "main", "source/server/server.cc:459", format, args...)
}

func (l *logger) config(lv level, src, format string, args ...any) {
	l.logf(lv, "config", src, format, args...)
}

func (l *logger) upstream(lv level, src, format string, args ...any) {
	l.logf(lv, "upstream", src, format, args...)
}

func (l *logger) admin(lv level, format string, args ...any) {
	l.logf(lv, "admin", "source/server/admin/admin_filter.cc:85", format, args...)
}
