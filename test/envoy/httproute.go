package main

import (
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// selectVirtualHost picks the virtual host for a Host header the way
// Envoy's RouteMatcher does: exact domain, then the longest suffix
// wildcard ("*.example.com"), then the longest prefix wildcard
// ("example.*"), then "*". Domains match case-insensitively; a domain
// without a port also matches the host with its port stripped.
func selectVirtualHost(rc *routev3.RouteConfiguration, host string) *routev3.VirtualHost {
	host = strings.ToLower(host)
	bare := host
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
		bare = host[:i]
	}
	var def, bestSuffix, bestPrefix *routev3.VirtualHost
	suffixLen, prefixLen := -1, -1
	for _, vh := range rc.GetVirtualHosts() {
		for _, d := range vh.GetDomains() {
			d = strings.ToLower(d)
			switch {
			case d == "*":
				if def == nil {
					def = vh
				}
			case d == host || d == bare:
				return vh
			case strings.HasPrefix(d, "*") && (strings.HasSuffix(host, d[1:]) || strings.HasSuffix(bare, d[1:])) && len(d) > suffixLen:
				bestSuffix, suffixLen = vh, len(d)
			case strings.HasSuffix(d, "*") && (strings.HasPrefix(host, d[:len(d)-1]) || strings.HasPrefix(bare, d[:len(d)-1])) && len(d) > prefixLen:
				bestPrefix, prefixLen = vh, len(d)
			}
		}
	}
	switch {
	case bestSuffix != nil:
		return bestSuffix
	case bestPrefix != nil:
		return bestPrefix
	}
	return def
}

// requestView is what route matching reads from a request.
type requestView struct {
	path    string // :path, with the query string
	method  string
	host    string
	headers http.Header
	grpc    bool
}

func viewOf(r *http.Request) requestView {
	return requestView{
		path:    r.URL.RequestURI(),
		method:  r.Method,
		host:    r.Host,
		headers: r.Header,
		grpc:    strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc"),
	}
}

// header reads a header as Envoy's HeaderUtility does: pseudo-headers
// from the request line, several values joined with ",".
func (v requestView) header(name string) (string, bool) {
	switch strings.ToLower(name) {
	case ":path":
		return v.path, true
	case ":method":
		return v.method, true
	case ":authority", "host":
		return v.host, v.host != ""
	case ":scheme":
		return "http", true
	}
	vals := v.headers.Values(name)
	if len(vals) == 0 {
		return "", false
	}
	return strings.Join(vals, ","), true
}

func pathWithoutQuery(p string) string {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		return p[:i]
	}
	return p
}

// matchRoute returns the first route of vh whose match accepts the request.
func matchRoute(vh *routev3.VirtualHost, v requestView) *routev3.Route {
	for _, r := range vh.GetRoutes() {
		if routeMatches(r.GetMatch(), v) {
			return r
		}
	}
	return nil
}

func routeMatches(m *routev3.RouteMatch, v requestView) bool {
	caseSensitive := m.GetCaseSensitive() == nil || m.GetCaseSensitive().GetValue()
	fold := func(s string) string {
		if caseSensitive {
			return s
		}
		return strings.ToLower(s)
	}
	switch ps := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		if !strings.HasPrefix(fold(v.path), fold(ps.Prefix)) {
			return false
		}
	case *routev3.RouteMatch_Path:
		if fold(pathWithoutQuery(v.path)) != fold(ps.Path) {
			return false
		}
	case *routev3.RouteMatch_SafeRegex:
		re, err := regexp.Compile("^(?:" + ps.SafeRegex.GetRegex() + ")$")
		if err != nil || !re.MatchString(pathWithoutQuery(v.path)) {
			return false
		}
	case *routev3.RouteMatch_PathSeparatedPrefix:
		p := fold(pathWithoutQuery(v.path))
		pre := fold(ps.PathSeparatedPrefix)
		if p != pre && !strings.HasPrefix(p, pre+"/") {
			return false
		}
	default:
		return false
	}
	if m.GetGrpc() != nil && !v.grpc {
		return false
	}
	for _, h := range m.GetHeaders() {
		if !headerMatches(h, v) {
			return false
		}
	}
	if len(m.GetQueryParameters()) > 0 {
		q, _ := url.ParseQuery(strings.TrimPrefix(v.path[len(pathWithoutQuery(v.path)):], "?"))
		for _, qm := range m.GetQueryParameters() {
			vals, ok := q[qm.GetName()]
			switch {
			case qm.GetPresentMatch():
				if !ok {
					return false
				}
			case qm.GetStringMatch() != nil:
				if !ok || !stringMatches(qm.GetStringMatch(), vals[0]) {
					return false
				}
			}
		}
	}
	return true
}

// headerMatches follows HeaderUtility::matchHeaders, including its rule for
// a missing header: only present_match can match it.
func headerMatches(h *routev3.HeaderMatcher, v requestView) bool {
	val, present := v.header(h.GetName())
	if !present && h.GetTreatMissingHeaderAsEmpty() {
		val, present = "", true
	}
	pm, isPresentMatch := h.GetHeaderMatchSpecifier().(*routev3.HeaderMatcher_PresentMatch)
	if !present {
		if h.GetInvertMatch() {
			return isPresentMatch && pm.PresentMatch
		}
		return isPresentMatch && !pm.PresentMatch
	}
	var ok bool
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case nil:
		ok = true
	case *routev3.HeaderMatcher_PresentMatch:
		ok = s.PresentMatch
	case *routev3.HeaderMatcher_ExactMatch:
		ok = val == s.ExactMatch
	case *routev3.HeaderMatcher_PrefixMatch:
		ok = strings.HasPrefix(val, s.PrefixMatch)
	case *routev3.HeaderMatcher_SuffixMatch:
		ok = strings.HasSuffix(val, s.SuffixMatch)
	case *routev3.HeaderMatcher_ContainsMatch:
		ok = strings.Contains(val, s.ContainsMatch)
	case *routev3.HeaderMatcher_SafeRegexMatch:
		re, err := regexp.Compile("^(?:" + s.SafeRegexMatch.GetRegex() + ")$")
		ok = err == nil && re.MatchString(val)
	case *routev3.HeaderMatcher_StringMatch:
		ok = stringMatches(s.StringMatch, val)
	default:
		// range_match is not modelled: no match.
		return false
	}
	return ok != h.GetInvertMatch()
}

func stringMatches(m *matcherv3.StringMatcher, val string) bool {
	if m.GetIgnoreCase() {
		val = strings.ToLower(val)
	}
	fold := func(s string) string {
		if m.GetIgnoreCase() {
			return strings.ToLower(s)
		}
		return s
	}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return val == fold(p.Exact)
	case *matcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(val, fold(p.Prefix))
	case *matcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(val, fold(p.Suffix))
	case *matcherv3.StringMatcher_Contains:
		return strings.Contains(val, fold(p.Contains))
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := regexp.Compile("^(?:" + p.SafeRegex.GetRegex() + ")$")
		return err == nil && re.MatchString(val)
	}
	return false
}

// applyResponseHeaders adds response_headers_to_add and drops
// response_headers_to_remove of the route, its virtual host and the route
// configuration, the route configuration last (Envoy's default order).
func applyResponseHeaders(h http.Header, rc *routev3.RouteConfiguration, vh *routev3.VirtualHost, r *routev3.Route) {
	type level struct {
		add    []*corev3.HeaderValueOption
		remove []string
	}
	levels := []level{
		{r.GetResponseHeadersToAdd(), r.GetResponseHeadersToRemove()},
		{vh.GetResponseHeadersToAdd(), vh.GetResponseHeadersToRemove()},
		{rc.GetResponseHeadersToAdd(), rc.GetResponseHeadersToRemove()},
	}
	for _, lv := range levels {
		for _, name := range lv.remove {
			h.Del(name)
		}
		for _, o := range lv.add {
			key, val := o.GetHeader().GetKey(), o.GetHeader().GetValue()
			if val == "" && len(o.GetHeader().GetRawValue()) > 0 {
				val = string(o.GetHeader().GetRawValue())
			}
			switch o.GetAppendAction() {
			case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
				h.Set(key, val)
			case corev3.HeaderValueOption_ADD_IF_ABSENT:
				if h.Get(key) == "" {
					h.Set(key, val)
				}
			case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
				if h.Get(key) != "" {
					h.Set(key, val)
				}
			default:
				if o.GetAppend() != nil && !o.GetAppend().GetValue() {
					h.Set(key, val)
				} else {
					h.Add(key, val)
				}
			}
		}
	}
}

// routeClusters lists the clusters a route can send to, for validate_clusters.
func routeClusters(rc *routev3.RouteConfiguration) []string {
	seen := map[string]bool{}
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			a := r.GetRoute()
			if a == nil {
				continue
			}
			if c := a.GetCluster(); c != "" {
				seen[c] = true
			}
			for _, wc := range a.GetWeightedClusters().GetClusters() {
				seen[wc.GetName()] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// defaultMaxDirectResponseBody is max_direct_response_body_size_bytes' default.
const defaultMaxDirectResponseBody = 4096
