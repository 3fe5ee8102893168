package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
)

type adminResponse struct {
	code  int
	body  string
	ctype string
	after func() // runs once the response is on the wire
}

func text(code int, body string) adminResponse {
	return adminResponse{code: code, body: body, ctype: "text/plain; charset=UTF-8"}
}

func jsonResp(code int, body string) adminResponse {
	return adminResponse{code: code, body: body, ctype: "application/json"}
}

type adminHandler struct {
	prefix  string
	help    string
	mutates bool
	fn      func(r *http.Request, q url.Values) adminResponse
}

type adminServer struct {
	s        *server
	sock     *boundSocket
	srv      *http.Server
	addr     string
	handlers []*adminHandler
	wedged   atomic.Bool
}

// startAdmin binds the admin address (a pipe is unlinked first and chmod-ed
// to its mode) and serves Envoy's admin endpoints on it.
func startAdmin(s *server) (*adminServer, error) {
	a := s.boot.GetAdmin().GetAddress()
	if a == nil {
		s.log.main(lvlWarn, "No admin address given, so no admin HTTP server started.")
		return nil, nil
	}
	addr, err := envoyAddr(a)
	if err != nil {
		return nil, err
	}
	sock, err := bindAddress(a, false, 1)
	if err != nil {
		return nil, err
	}
	// The admin listener listens at once, before initialization.
	if err := sock.listen(backlogSomaxconn); err != nil {
		sock.close()
		return nil, err
	}
	as := &adminServer{s: s, sock: sock, addr: addr}
	if sa := a.GetSocketAddress(); sa != nil {
		as.addr = sock.addr.String()
	}
	as.handlers = as.routes()
	// The admin listener runs on the main thread: its per-handler stats are
	// listener.admin.main_thread.*, next to the listener-wide ones.
	active := s.stats.gauge("listener.admin.downstream_cx_active")
	total := s.stats.counter("listener.admin.downstream_cx_total")
	mainActive := s.stats.gauge("listener.admin.main_thread.downstream_cx_active")
	mainTotal := s.stats.counter("listener.admin.main_thread.downstream_cx_total")
	s.stats.gauge("listener.admin.downstream_pre_cx_active")
	httpActive := s.stats.gauge("http.admin.downstream_cx_active")
	httpTotal := s.stats.counter("http.admin.downstream_cx_total")
	s.stats.counter("http.admin.downstream_rq_total")
	as.srv = &http.Server{
		Handler:           as,
		ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				active.inc()
				total.inc()
				mainActive.inc()
				mainTotal.inc()
				httpActive.inc()
				httpTotal.inc()
			case http.StateClosed, http.StateHijacked:
				active.dec()
				mainActive.dec()
				httpActive.dec()
			}
		},
	}
	s.log.main(lvlInfo, "admin address: %s", addr)
	if p := s.o.adminAddressPath; p != "" {
		if err := os.WriteFile(p, []byte(as.addr), 0o644); err != nil {
			s.log.main(lvlCritical, "cannot open admin address output file %s for writing.", p)
		}
	}
	go as.srv.Serve(sock.tcp[0])
	return as, nil
}

func (as *adminServer) close() {
	if as == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	as.srv.Shutdown(ctx)
	as.srv.Close()
	as.sock.close()
}

func (as *adminServer) routes() []*adminHandler {
	h := []*adminHandler{
		{prefix: "/", help: "Admin home page", fn: as.home},
		{prefix: "/certs", help: "print certs on machine", fn: as.certs},
		{prefix: "/clusters", help: "upstream cluster status", fn: as.clusters},
		{prefix: "/config_dump", help: "dump current Envoy configs (experimental)", fn: as.configDump},
		{prefix: "/drain_listeners", help: "drain listeners", mutates: true, fn: as.drainListeners},
		{prefix: "/healthcheck/fail", help: "cause the server to fail health checks", mutates: true, fn: as.healthcheckFail},
		{prefix: "/healthcheck/ok", help: "cause the server to pass health checks", mutates: true, fn: as.healthcheckOK},
		{prefix: "/help", help: "print out list of admin commands", fn: as.help},
		{prefix: "/hot_restart_version", help: "print the hot restart compatibility version", fn: func(*http.Request, url.Values) adminResponse { return text(200, hotRestartVers) }},
		{prefix: "/listeners", help: "print listener info", fn: as.listeners},
		{prefix: "/logging", help: "query/change logging levels", mutates: true, fn: as.logging},
		{prefix: "/memory", help: "print current allocation/heap usage", fn: as.memory},
		{prefix: "/quitquitquit", help: "exit the server", mutates: true, fn: as.quit},
		{prefix: "/ready", help: "print server state, return 200 if LIVE, otherwise return 503", fn: as.ready},
		{prefix: "/reopen_logs", help: "reopen access logs", mutates: true, fn: as.reopenLogs},
		{prefix: "/reset_counters", help: "reset all counters to zero", mutates: true, fn: as.resetCounters},
		{prefix: "/runtime", help: "print runtime values", fn: as.runtime},
		{prefix: "/server_info", help: "print server version/status information", fn: as.serverInfo},
		{prefix: "/stats", help: "print server stats", fn: as.stats},
		{prefix: "/stats/prometheus", help: "print server stats in prometheus format", fn: as.prometheus},
	}
	return h
}

func (as *adminServer) helpText() string {
	var b strings.Builder
	b.WriteString("admin commands are:\n")
	hs := append([]*adminHandler(nil), as.handlers...)
	sort.Slice(hs, func(i, j int) bool { return hs[i].prefix < hs[j].prefix })
	for _, h := range hs {
		fmt.Fprintf(&b, "  %s: %s\n", h.prefix, h.help)
	}
	return b.String()
}

func (as *adminServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if as.wedged.Load() {
		// ENVOY_STANDIN_WEDGE_ADMIN_AFTER: accept, never answer.
		select {
		case <-as.s.done:
		case <-r.Context().Done():
		}
		return
	}
	s := as.s
	s.stats.counter("http.admin.downstream_rq_total").inc()
	s.log.admin(lvlDebug, "admin request: %s %s", r.Method, r.URL.RequestURI())
	path := r.URL.Path
	q, _ := url.ParseQuery(r.URL.RawQuery)
	var resp adminResponse
	var h *adminHandler
	for _, c := range as.handlers {
		if c.prefix == path {
			h = c
		}
	}
	switch {
	case h == nil:
		resp = text(http.StatusNotFound, "invalid path. "+as.helpText())
	case h.mutates && r.Method != http.MethodPost:
		s.log.admin(lvlError, "admin path \"%s\" mutates state, method=%s rather than POST", h.prefix, r.Method)
		resp = text(http.StatusMethodNotAllowed, fmt.Sprintf("Method %s not allowed, POST required.", r.Method))
	default:
		resp = h.fn(r, q)
	}
	hdr := w.Header()
	hdr.Set("Content-Type", resp.ctype)
	hdr.Set("Cache-Control", "no-cache, max-age=0")
	hdr.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(resp.code)
	if r.Method != http.MethodHead {
		w.Write([]byte(resp.body))
	}
	s.stats.counter(fmt.Sprintf("http.admin.downstream_rq_%dxx", resp.code/100)).inc()
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if resp.after != nil {
		resp.after()
	}
}

func (as *adminServer) home(*http.Request, url.Values) adminResponse {
	var b strings.Builder
	b.WriteString("<head>\n  <title>Envoy Admin</title>\n</head>\n<body>\n  <table class='home-table'>\n    <tbody>\n")
	for _, h := range as.handlers {
		fmt.Fprintf(&b, "      <tr class='home-row'><td class='home-data'><a href='%s'>%s</a></td><td class='home-data'>%s</td></tr>\n", strings.TrimPrefix(h.prefix, "/"), h.prefix, h.help)
	}
	b.WriteString("    </tbody>\n  </table>\n</body>\n")
	return adminResponse{code: 200, body: b.String(), ctype: "text/html; charset=UTF-8"}
}

func (as *adminServer) help(*http.Request, url.Values) adminResponse {
	return text(200, as.helpText())
}

func (as *adminServer) ready(*http.Request, url.Values) adminResponse {
	st := as.s.state()
	code := http.StatusOK
	if st != adminv3.ServerInfo_LIVE {
		code = http.StatusServiceUnavailable
	}
	return text(code, st.String()+"\n")
}

var jsonOut = protojson.MarshalOptions{UseProtoNames: true, Indent: " ", Resolver: dumpResolver{}}

// dumpResolver renders an Any of a type this binary lacks as just its
// "@type", instead of failing the whole dump.
type dumpResolver struct{}

func (dumpResolver) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	if mt, err := typeResolver.FindMessageByURL(url); err == nil {
		return mt, nil
	}
	return (&emptypb.Empty{}).ProtoReflect().Type(), nil
}

func (dumpResolver) FindMessageByName(n protoreflect.FullName) (protoreflect.MessageType, error) {
	return typeResolver.FindMessageByName(n)
}

func (dumpResolver) FindExtensionByName(n protoreflect.FullName) (protoreflect.ExtensionType, error) {
	return typeResolver.FindExtensionByName(n)
}

func (dumpResolver) FindExtensionByNumber(m protoreflect.FullName, f protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	return typeResolver.FindExtensionByNumber(m, f)
}

func marshalJSON(m proto.Message, defaults bool) string {
	o := jsonOut
	o.EmitDefaultValues = defaults
	b, err := o.Marshal(m)
	if err != nil {
		return fmt.Sprintf("{\"error\": %q}", err.Error())
	}
	return string(b) + "\n"
}

func (as *adminServer) serverInfo(*http.Request, url.Values) adminResponse {
	s := as.s
	o := s.o
	up := durationpb.New(time.Since(s.start).Truncate(time.Second))
	mode := adminv3.CommandLineOptions_Serve
	switch o.mode {
	case "validate":
		mode = adminv3.CommandLineOptions_Validate
	case "init_only":
		mode = adminv3.CommandLineOptions_InitOnly
	}
	ipv := adminv3.CommandLineOptions_v4
	if o.localAddressIPVersion == "v6" {
		ipv = adminv3.CommandLineOptions_v6
	}
	ds := adminv3.CommandLineOptions_Gradual
	if o.drainStrategy == "immediate" {
		ds = adminv3.CommandLineOptions_Immediate
	}
	socketMode, _ := strconv.ParseUint(o.socketMode, 8, 32)
	var disabled []string
	if o.disableExtensions != "" {
		disabled = strings.Split(o.disableExtensions, ",")
	}
	info := &adminv3.ServerInfo{
		Version:            s.build,
		State:              s.state(),
		UptimeCurrentEpoch: up,
		UptimeAllEpochs:    up,
		HotRestartVersion:  hotRestartVers,
		CommandLineOptions: &adminv3.CommandLineOptions{
			BaseId:                     uint64(o.baseID),
			UseDynamicBaseId:           o.useDynamicBaseID,
			BaseIdPath:                 o.baseIDPath,
			Concurrency:                o.concurrency,
			ConfigPath:                 o.configPath,
			ConfigYaml:                 o.configYAML,
			AllowUnknownStaticFields:   o.allowUnknownStatic,
			RejectUnknownDynamicFields: o.rejectUnknownDynamic,
			IgnoreUnknownDynamicFields: o.ignoreUnknownDynamic,
			SkipDeprecatedLogs:         o.skipDeprecatedLogs,
			AdminAddressPath:           o.adminAddressPath,
			LocalAddressIpVersion:      ipv,
			LogLevel:                   o.logLevel.String(),
			ComponentLogLevel:          o.componentLogLevel,
			LogFormat:                  o.logFormat,
			LogFormatEscaped:           o.logFormatEscaped,
			LogPath:                    o.logPath,
			ServiceCluster:             o.serviceCluster,
			ServiceNode:                o.serviceNode,
			ServiceZone:                o.serviceZone,
			FileFlushInterval:          durationpb.New(time.Duration(o.fileFlushIntervalMsec) * time.Millisecond),
			DrainTime:                  durationpb.New(time.Duration(o.drainTimeS) * time.Second),
			DrainStrategy:              ds,
			ParentShutdownTime:         durationpb.New(time.Duration(o.parentShutdownTimeS) * time.Second),
			Mode:                       mode,
			DisableHotRestart:          o.disableHotRestart,
			EnableMutexTracing:         o.enableMutexTracing,
			RestartEpoch:               o.restartEpoch,
			CpusetThreads:              o.cpusetThreads,
			DisabledExtensions:         disabled,
			EnableFineGrainLogging:     o.enableFineGrain,
			SocketPath:                 o.socketPath,
			SocketMode:                 uint32(socketMode),
			EnableCoreDump:             o.enableCoreDump,
			StatsTag:                   o.statsTags,
			SkipHotRestartOnNoParent:   o.skipHotRestartNoPar,
			SkipHotRestartParentStats:  o.skipHotRestartStats,
		},
		Node: s.wireNode(),
	}
	return jsonResp(200, marshalJSON(info, true))
}

func (as *adminServer) statsQuery(q url.Values) (*statsQuery, *adminResponse) {
	sq := &statsQuery{typ: q.Get("type"), format: q.Get("format")}
	_, sq.usedOnly = q["usedonly"]
	_, sq.textReadout = q["text_readouts"]
	if f := q.Get("filter"); f != "" {
		re, err := regexp.Compile(f)
		if err != nil {
			r := text(http.StatusBadRequest, "Invalid re2 regex")
			return nil, &r
		}
		sq.filter = re
	}
	switch sq.typ {
	case "", "All", "Counters", "Gauges", "Histograms", "TextReadouts":
	default:
		r := text(http.StatusBadRequest, fmt.Sprintf("invalid &type= param: '%s'", sq.typ))
		return nil, &r
	}
	return sq, nil
}

func (as *adminServer) stats(_ *http.Request, q url.Values) adminResponse {
	sq, bad := as.statsQuery(q)
	if bad != nil {
		return *bad
	}
	if as.s.boot.GetStatsFlushOnAdmin() {
		as.s.flushStats()
	}
	switch sq.format {
	case "", "text":
		return text(200, as.s.stats.renderText(sq))
	case "json":
		return jsonResp(200, as.s.stats.renderJSON(sq))
	case "prometheus":
		if statsFileBody != nil {
			return text(200, *statsFileBody)
		}
		return text(200, as.s.stats.renderPrometheus(sq))
	}
	return text(http.StatusBadRequest, "usage: /stats?format=(html|active-html|json|prometheus|text)\n")
}

func (as *adminServer) prometheus(r *http.Request, q url.Values) adminResponse {
	q.Set("format", "prometheus")
	return as.stats(r, q)
}

func (as *adminServer) healthcheckFail(*http.Request, url.Values) adminResponse {
	return as.setHealthFailed(true)
}

func (as *adminServer) healthcheckOK(*http.Request, url.Values) adminResponse {
	return as.setHealthFailed(false)
}

func (as *adminServer) setHealthFailed(failed bool) adminResponse {
	s := as.s
	s.mu.Lock()
	s.healthFailed = failed
	s.updateGaugesLocked()
	s.mu.Unlock()
	live := int64(1)
	if failed {
		live = 0
	}
	s.stats.gauge("server.live").set(live)
	return text(200, "OK\n")
}

// drainListeners is ListenersHandler::handlerDrainListeners.
func (as *adminServer) drainListeners(_ *http.Request, q url.Values) adminResponse {
	_, inboundOnly := q["inboundonly"]
	_, graceful := q["graceful"]
	_, skipExit := q["skip_exit"]
	if skipExit && !graceful {
		return text(http.StatusBadRequest, "skip_exit requires graceful\n")
	}
	s := as.s
	if !graceful {
		s.stopListeners(inboundOnly)
		return text(200, "OK\n")
	}
	s.mu.Lock()
	started := s.drainSequence
	s.drainSequence = true
	s.mu.Unlock()
	if !started {
		s.log.main(lvlInfo, "draining listeners for %s", s.drainFor)
		go func() {
			select {
			case <-time.After(s.drainFor):
			case <-s.done:
				return
			}
			if !skipExit {
				s.stopListeners(inboundOnly)
			}
		}()
	}
	return text(200, "OK\n")
}

func (s *server) stopListeners(inboundOnly bool) {
	s.log.main(lvlInfo, "closing and draining listeners")
	s.mu.Lock()
	defer s.mu.Unlock()
	if inboundOnly {
		if s.stopped == stopNone {
			s.stopped = stopInbound
		}
	} else {
		s.stopped = stopAll
	}
	for _, l := range s.listeners {
		if inboundOnly && !l.inbound() {
			continue
		}
		l.stop()
	}
	s.updateGaugesLocked()
}

func (as *adminServer) quit(*http.Request, url.Values) adminResponse {
	as.s.log.main(lvlInfo, "shutting down server instance")
	r := text(200, "OK\n")
	r.after = func() {
		select {
		case as.s.exit <- 0:
		default:
		}
	}
	return r
}

func (as *adminServer) logging(_ *http.Request, q url.Values) adminResponse {
	l := as.s.log
	if v, ok := q["level"]; ok && (len(v) == 0 || v[0] == "") {
		delete(q, "level")
	}
	if v, ok := q["paths"]; ok && (len(v) == 0 || v[0] == "") {
		delete(q, "paths")
	}
	err := func() string {
		if len(q) == 0 {
			return ""
		}
		if len(q) != 1 {
			return "invalid number of parameters"
		}
		if lv := q.Get("level"); lv != "" {
			level, err := parseLogLevel(lv)
			if err != nil {
				return "unknown logger level"
			}
			l.setAll(level)
			return ""
		}
		changes := map[string]level{}
		if paths := q.Get("paths"); paths != "" {
			for _, p := range strings.Split(paths, ",") {
				name, lv, _ := strings.Cut(strings.TrimSpace(p), ":")
				if name == "" || lv == "" {
					return "empty logger name or empty logger level"
				}
				level, err := parseLogLevel(lv)
				if err != nil {
					return "unknown logger level"
				}
				changes[name] = level
			}
		} else {
			for k, v := range q {
				level, err := parseLogLevel(v[0])
				if err != nil {
					return "unknown logger level"
				}
				changes[k] = level
			}
		}
		for name := range changes {
			if !isComponent(name) {
				return "unknown logger name"
			}
		}
		for name, lv := range changes {
			l.set(name, lv)
		}
		return ""
	}()
	var b strings.Builder
	code := 200
	if err != "" {
		code = http.StatusNotFound
		fmt.Fprintf(&b, "error: %s\n\n", err)
		b.WriteString("usage: /logging?<name>=<level> (change single level)\n")
		b.WriteString("usage: /logging?paths=name1:level1,name2:level2,... (change multiple levels)\n")
		b.WriteString("usage: /logging?level=<level> (change all levels)\n")
		b.WriteString("levels: ")
		for _, n := range levelNames {
			b.WriteString(n + " ")
		}
		b.WriteString("\n")
	}
	b.WriteString(l.activeText())
	return text(code, b.String())
}

func (as *adminServer) resetCounters(*http.Request, url.Values) adminResponse {
	for _, st := range as.s.stats.snapshot() {
		if st.kind == kindCounter {
			st.value.Store(0)
		}
	}
	return text(200, "OK\n")
}

func (as *adminServer) memory(*http.Request, url.Values) adminResponse {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	mem := &adminv3.Memory{
		Allocated:          m.HeapAlloc,
		HeapSize:           m.HeapSys,
		PageheapUnmapped:   m.HeapReleased,
		PageheapFree:       m.HeapIdle - m.HeapReleased,
		TotalThreadCache:   0,
		TotalPhysicalBytes: m.Sys,
	}
	return jsonResp(200, marshalJSON(mem, true))
}

func (as *adminServer) runtime(*http.Request, url.Values) adminResponse {
	type entry struct {
		FinalValue  string   `json:"final_value"`
		LayerValues []string `json:"layer_values"`
	}
	out := struct {
		Layers  []string          `json:"layers"`
		Entries map[string]*entry `json:"entries"`
	}{Layers: []string{}, Entries: map[string]*entry{}}
	layers := as.s.boot.GetLayeredRuntime().GetLayers()
	for i, layer := range layers {
		out.Layers = append(out.Layers, layer.GetName())
		sl := layer.GetStaticLayer()
		if sl == nil {
			continue
		}
		flat := map[string]string{}
		flattenStruct("", sl.AsMap(), flat)
		for k, v := range flat {
			e := out.Entries[k]
			if e == nil {
				e = &entry{LayerValues: make([]string, len(layers))}
				out.Entries[k] = e
			}
			e.LayerValues[i] = v
			e.FinalValue = v
		}
	}
	b, _ := json.MarshalIndent(out, "", " ")
	return jsonResp(200, string(b)+"\n")
}

func flattenStruct(prefix string, m map[string]any, out map[string]string) {
	for k, v := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		switch t := v.(type) {
		case map[string]any:
			flattenStruct(key, t, out)
		case float64:
			out[key] = strconv.FormatFloat(t, 'f', -1, 64)
		default:
			out[key] = fmt.Sprint(t)
		}
	}
}

func (as *adminServer) certs(*http.Request, url.Values) adminResponse {
	return jsonResp(200, marshalJSON(&adminv3.Certificates{}, false))
}

func (as *adminServer) listeners(_ *http.Request, q url.Values) adminResponse {
	s := as.s
	s.mu.Lock()
	names := s.listenerNames()
	info := &adminv3.Listeners{}
	var b strings.Builder
	for _, n := range names {
		l := s.listeners[n]
		addr := l.addr
		if l.sock != nil && l.sock.addr != nil && !l.stopped {
			addr = l.sock.addr.String()
		}
		fmt.Fprintf(&b, "%s::%s\n", n, addr)
		info.ListenerStatuses = append(info.ListenerStatuses, &adminv3.ListenerStatus{Name: n, LocalAddress: boundAddress(l)})
	}
	s.mu.Unlock()
	if q.Get("format") == "json" {
		return jsonResp(200, marshalJSON(info, false))
	}
	return text(200, b.String())
}

func boundAddress(l *activeListener) *corev3.Address {
	if l.sock != nil {
		if ta, ok := l.sock.addr.(*net.TCPAddr); ok {
			return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: ta.IP.String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ta.Port)},
			}}}
		}
	}
	return l.cfg.GetAddress()
}

func (as *adminServer) clusters(_ *http.Request, q url.Values) adminResponse {
	s := as.s
	s.mu.Lock()
	defer s.mu.Unlock()
	type entry struct {
		name    string
		dynamic bool
		addrs   []string
	}
	var list []entry
	for _, c := range s.staticClusters {
		list = append(list, entry{c.GetName(), false, endpointAddrs(c.GetLoadAssignment())})
	}
	for _, n := range s.resourceNames(typeCluster) {
		c := s.res[typeCluster][n].msg
		la := clusterLoadAssignment(s, c)
		list = append(list, entry{n, true, endpointAddrs(la)})
	}
	if q.Get("format") == "json" {
		out := &adminv3.Clusters{}
		for _, e := range list {
			cs := &adminv3.ClusterStatus{Name: e.name, AddedViaApi: e.dynamic}
			out.ClusterStatuses = append(out.ClusterStatuses, cs)
		}
		return jsonResp(200, marshalJSON(out, false))
	}
	var b strings.Builder
	for _, e := range list {
		fmt.Fprintf(&b, "%s::observability_name::%s\n", e.name, e.name)
		fmt.Fprintf(&b, "%s::added_via_api::%v\n", e.name, e.dynamic)
		for _, a := range e.addrs {
			fmt.Fprintf(&b, "%s::%s::health_flags::healthy\n", e.name, a)
		}
	}
	return text(200, b.String())
}
