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
	mu         sync.Mutex
	stats      map[string]*stat
	extractors []tagExtractor
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

type tagExtractor struct {
	name  string
	re    *regexp.Regexp
	fixed *string
	not   string // a value this extractor never yields (Envoy's negative_matching_value)
}

// envoyAddress is well_known_names.cc's <ADDRESS>: an IPv4 or bracketed,
// sanitized IPv6 address, then "_<port>".
const envoyAddress = `(?:(?:\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[[a-fA-F_\d]+\])_\d+)`

// Envoy's default tag extractors for the stats this stand-in has, in
// Envoy's order: those without a literal prefix (worker id) run first.
var defaultTagExtractors = []tagExtractor{
	{name: "envoy.worker_id", re: regexp.MustCompile(`^(?:listener\.(?:` + envoyAddress + `|[^.]+)\.|server\.|listener_manager\.)worker_((\d+)\.)`)},
	{name: "envoy.cluster_name", re: regexp.MustCompile(`^cluster\.(([^.]+)\.)`)},
	{name: "envoy.http_conn_manager_prefix", re: regexp.MustCompile(`^http\.(([^.]+)\.)`)},
	{name: "envoy.tcp_prefix", re: regexp.MustCompile(`^tcp\.(([^.]+)\.)`)},
	{name: "envoy.listener_address", re: regexp.MustCompile(`^listener\.((` + envoyAddress + `|[^.]+)\.)`), not: "admin"},
}

// setTagSpecifiers builds the tag producer like TagProducerImpl: custom
// stats_tags first, then the defaults they do not replace, then --stats-tag.
func (st *statStore) setTagSpecifiers(specs []tagSpec, useDefaults bool, cli []string) error {
	var out []tagExtractor
	names := map[string]bool{}
	for _, sp := range specs {
		names[sp.name] = true
		switch {
		case sp.fixed != nil:
			out = append(out, tagExtractor{name: sp.name, fixed: sp.fixed})
		case sp.regex != "":
			// Envoy evaluates these with std::regex (ECMAScript), which
			// allows lookahead that RE2 lacks; such tags are skipped here.
			if re, err := regexp.Compile(sp.regex); err == nil {
				out = append(out, tagExtractor{name: sp.name, re: re})
			}
		default:
			found := false
			for _, d := range defaultTagExtractors {
				if d.name == sp.name {
					out = append(out, d)
					found = true
				}
			}
			if !found {
				return fmt.Errorf("No regex specified for tag specifier and no default regex for name: '%s'", sp.name)
			}
		}
	}
	if useDefaults {
		for _, d := range defaultTagExtractors {
			if !names[d.name] {
				out = append(out, d)
			}
		}
	}
	for _, t := range cli {
		n, v, _ := strings.Cut(t, ":")
		out = append(out, tagExtractor{name: n, fixed: &v})
	}
	st.mu.Lock()
	st.extractors = out
	st.mu.Unlock()
	return nil
}

type tagSpec struct {
	name  string
	regex string
	fixed *string
}

// extractTags matches every extractor against the full name and removes
// the union of their first capture groups, as TagProducerImpl does.
func (st *statStore) extractTags(name string) (string, [][2]string) {
	st.mu.Lock()
	ex := st.extractors
	st.mu.Unlock()
	if ex == nil {
		ex = defaultTagExtractors
	}
	var tags [][2]string
	remove := make([]bool, len(name))
	for _, te := range ex {
		if te.fixed != nil {
			tags = append(tags, [2]string{te.name, *te.fixed})
			continue
		}
		m := te.re.FindStringSubmatchIndex(name)
		if m == nil || len(m) < 4 || m[2] < 0 {
			continue
		}
		vs, ve := m[2], m[3]
		if len(m) >= 6 && m[4] >= 0 {
			vs, ve = m[4], m[5]
		}
		if te.not != "" && name[vs:ve] == te.not {
			continue
		}
		tags = append(tags, [2]string{te.name, name[vs:ve]})
		for i := m[2]; i < m[3]; i++ {
			remove[i] = true
		}
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if !remove[i] {
			b.WriteByte(name[i])
		}
	}
	return b.String(), tags
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
		parts = append(parts, fmt.Sprintf("%s=\"%s\"", promInvalid.ReplaceAllString(t[0], "_"), v))
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
		base, tags := st.extractTags(s.name)
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
