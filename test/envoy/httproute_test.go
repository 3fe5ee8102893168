package main

import (
	"net/http"
	"net/url"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestSelectVirtualHost(t *testing.T) {
	rc := &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{
		{Name: "any", Domains: []string{"*"}},
		{Name: "exact", Domains: []string{"api.example.com"}},
		{Name: "suffix", Domains: []string{"*.example.com"}},
		{Name: "longer-suffix", Domains: []string{"*.eu.example.com"}},
		{Name: "prefix", Domains: []string{"api.*"}},
	}}
	tests := []struct{ host, want string }{
		{"api.example.com", "exact"},
		{"API.Example.com:8080", "exact"},
		{"www.example.com", "suffix"},
		{"www.eu.example.com", "longer-suffix"},
		{"api.other.org", "prefix"},
		{"localhost", "any"},
	}
	for _, tt := range tests {
		if got := selectVirtualHost(rc, tt.host).GetName(); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.host, got, tt.want)
		}
	}
}

func exactHeader(name, value string) *routev3.HeaderMatcher {
	return &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: value}},
	}}
}

func TestRouteMatching(t *testing.T) {
	// Kuma's dynconf routes: 304 on a matching If-None-Match, else 200.
	vh := &routev3.VirtualHost{Routes: []*routev3.Route{
		{Name: "not-modified", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/meshmetric"}, Headers: []*routev3.HeaderMatcher{exactHeader("If-None-Match", "abc")}}},
		{Name: "config", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/meshmetric"}}},
		{Name: "metrics", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/metrics"}}},
		{Name: "absent", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/absent"}, Headers: []*routev3.HeaderMatcher{
			{Name: "x-debug", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: false}},
		}}},
		{Name: "inverted", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/inv"}, Headers: []*routev3.HeaderMatcher{
			{Name: "x-env", InvertMatch: true, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "prod"}}}},
		}}},
		{Name: "ci", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/CI"}, CaseSensitive: wrapperspb.Bool(false)}},
	}}
	tests := []struct {
		name, path string
		headers    map[string]string
		want       string
	}{
		{"etag matches", "/meshmetric", map[string]string{"If-None-Match": "abc"}, "not-modified"},
		{"etag differs", "/meshmetric", map[string]string{"If-None-Match": "old"}, "config"},
		{"no etag", "/meshmetric", nil, "config"},
		{"path match ignores the query", "/meshmetric?x=1", nil, "config"},
		{"path match is exact", "/meshmetrics", nil, ""},
		{"prefix keeps matching with more path", "/metrics/extra", nil, "metrics"},
		{"present_match false matches a missing header", "/absent", nil, "absent"},
		{"present_match false rejects a present header", "/absent", map[string]string{"X-Debug": "1"}, ""},
		{"inverted match accepts another value", "/inv", map[string]string{"X-Env": "dev"}, "inverted"},
		{"inverted match rejects the value", "/inv", map[string]string{"X-Env": "prod"}, ""},
		{"inverted match never matches a missing header", "/inv", nil, ""},
		{"case-insensitive path", "/ci", nil, "ci"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set(k, v)
			}
			got := matchRoute(vh, requestView{path: tt.path, method: "GET", host: "localhost", headers: h}).GetName()
			if got != tt.want {
				t.Errorf("got route %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPrefixRewrite(t *testing.T) {
	m := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/metrics"}}
	a := &routev3.RouteAction{PrefixRewrite: "/meshmetric"}
	tests := []struct{ in, want string }{
		{"/metrics", "/meshmetric"},
		{"/metrics?format=text", "/meshmetric?format=text"},
		{"/metrics/sub", "/meshmetric/sub"},
	}
	for _, tt := range tests {
		u, _ := url.Parse("http://h" + tt.in)
		req := &http.Request{URL: u}
		rewritePath(req, m, a)
		if got := req.URL.RequestURI(); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.in, got, tt.want)
		}
	}
}
