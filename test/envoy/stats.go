package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

type statKind int

const (
	kindCounter statKind = iota
	kindGauge
	kindText
)

type stat struct {
	name  string
	kind  statKind
	value atomic.Int64
	used  atomic.Bool
	text  atomic.Value // string, for text readouts
}

func (s *stat) inc()             { s.add(1) }
func (s *stat) dec()             { s.add(-1) }
func (s *stat) add(n int64)      { s.value.Add(n); s.used.Store(true) }
func (s *stat) set(v int64)      { s.value.Store(v); s.used.Store(true) }
func (s *stat) get() int64       { return s.value.Load() }
func (s *stat) setText(t string) { s.text.Store(t); s.used.Store(true) }

func (s *stat) textValue() string {
	t, _ := s.text.Load().(string)
	return t
}

type statStore struct {
	mu    sync.Mutex
	stats map[string]*stat
}

func newStatStore() *statStore { return &statStore{stats: map[string]*stat{}} }

func (st *statStore) get(name string, kind statKind) *stat {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.stats[name]
	if !ok {
		s = &stat{name: name, kind: kind}
		st.stats[name] = s
	}
	return s
}

func (st *statStore) counter(name string) *stat { return st.get(name, kindCounter) }
func (st *statStore) gauge(name string) *stat   { return st.get(name, kindGauge) }
func (st *statStore) textReadout(name string) *stat {
	return st.get(name, kindText)
}

// removePrefix drops a scope's stats, as Envoy does when a listener goes.
func (st *statStore) removePrefix(prefix string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for n := range st.stats {
		if strings.HasPrefix(n, prefix) {
			delete(st.stats, n)
		}
	}
}

func (st *statStore) snapshot() []*stat {
	st.mu.Lock()
	out := make([]*stat, 0, len(st.stats))
	for _, s := range st.stats {
		out = append(out, s)
	}
	st.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

type statsQuery struct {
	filter      *regexp.Regexp
	usedOnly    bool
	typ         string // All, Counters, Gauges, TextReadouts, Histograms
	format      string
	textReadout bool
}

func (q *statsQuery) match(s *stat) bool {
	if q.usedOnly && !s.used.Load() {
		return false
	}
	if q.filter != nil && !q.filter.MatchString(s.name) {
		return false
	}
	switch q.typ {
	case "", "All":
	case "Counters":
		return s.kind == kindCounter
	case "Gauges":
		return s.kind == kindGauge
	case "TextReadouts":
		return s.kind == kindText
	default:
		return false
	}
	return true
}

func (st *statStore) renderText(q *statsQuery) string {
	var b strings.Builder
	for _, s := range st.snapshot() {
		if !q.match(s) {
			continue
		}
		if s.kind == kindText {
			fmt.Fprintf(&b, "%s: %s\n", s.name, strconv.Quote(s.textValue()))
			continue
		}
		fmt.Fprintf(&b, "%s: %d\n", s.name, s.get())
	}
	return b.String()
}

func (st *statStore) renderJSON(q *statsQuery) string {
	type entry struct {
		Name  string `json:"name"`
		Value any    `json:"value"`
	}
	out := struct {
		Stats []entry `json:"stats"`
	}{Stats: []entry{}}
	for _, s := range st.snapshot() {
		if !q.match(s) {
			continue
		}
		if s.kind == kindText {
			out.Stats = append(out.Stats, entry{s.name, s.textValue()})
		} else {
			out.Stats = append(out.Stats, entry{s.name, s.get()})
		}
	}
	j, _ := json.MarshalIndent(out, "", " ")
	return string(j) + "\n"
}

// Envoy's default tag extractors for the stats this stand-in has.
var tagExtractors = []struct {
	tag string
	re  *regexp.Regexp
}{
	{"envoy_listener_address", regexp.MustCompile(`^listener\.(((?:[_.[:digit:]]*|[_\[\]aAbBcCdDeEfF[:digit:]]*))\.)`)},
	{"envoy_cluster_name", regexp.MustCompile(`^cluster\.((.*?)\.)`)},
	{"envoy_http_conn_manager_prefix", regexp.MustCompile(`^http\.((.*?)\.)`)},
}

func extractTags(name string) (string, [][2]string) {
	var tags [][2]string
	for _, te := range tagExtractors {
		m := te.re.FindStringSubmatchIndex(name)
		if m == nil {
			continue
		}
		value := name[m[4]:m[5]]
		name = name[:m[2]] + name[m[3]:]
		tags = append(tags, [2]string{te.tag, value})
	}
	return name, tags
}

var promInvalid = regexp.MustCompile(`[^a-zA-Z0-9_]`)

func promName(s string) string { return "envoy_" + promInvalid.ReplaceAllString(s, "_") }

func promLabels(tags [][2]string) string {
	if len(tags) == 0 {
		return ""
	}
	parts := make([]string, 0, len(tags))
	for _, t := range tags {
		v := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(t[1])
		parts = append(parts, fmt.Sprintf("%s=\"%s\"", t[0], v))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func (st *statStore) renderPrometheus(q *statsQuery) string {
	type series struct {
		labels string
		value  string
	}
	groups := map[statKind]map[string][]series{kindCounter: {}, kindGauge: {}}
	for _, s := range st.snapshot() {
		if !q.match(s) {
			continue
		}
		base, tags := extractTags(s.name)
		name := promName(base)
		switch s.kind {
		case kindText:
			if !q.textReadout {
				continue
			}
			tags = append(tags, [2]string{"text_value", s.textValue()})
			groups[kindGauge][name] = append(groups[kindGauge][name], series{promLabels(tags), "0"})
		default:
			groups[s.kind][name] = append(groups[s.kind][name], series{promLabels(tags), strconv.FormatInt(s.get(), 10)})
		}
	}
	var b strings.Builder
	for _, k := range []statKind{kindCounter, kindGauge} {
		names := make([]string, 0, len(groups[k]))
		for n := range groups[k] {
			names = append(names, n)
		}
		sort.Strings(names)
		typ := "counter"
		if k == kindGauge {
			typ = "gauge"
		}
		for _, n := range names {
			fmt.Fprintf(&b, "# TYPE %s %s\n", n, typ)
			ss := groups[k][n]
			sort.Slice(ss, func(i, j int) bool { return ss[i].labels < ss[j].labels })
			for _, s := range ss {
				fmt.Fprintf(&b, "%s%s %s\n", n, s.labels, s.value)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// listenerStatPrefix is Envoy's per-listener scope: the stat_prefix or the
// address with ':' sanitized to '_'.
func listenerStatPrefix(statPrefix, addr string) string {
	if statPrefix != "" {
		return "listener." + statPrefix + "."
	}
	return "listener." + strings.ReplaceAll(addr, ":", "_") + "."
}
