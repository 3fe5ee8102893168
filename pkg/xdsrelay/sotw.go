package xdsrelay

import (
	"fmt"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/zoneproxy/zoneproxy/pkg/lkgcache"
)

// sotw is state-of-the-world ADS: every response carries the whole set of
// its type (or of the names asked for).
type sotw struct{}

func (sotw) name() string    { return "state-of-the-world ADS" }
func (sotw) method() string  { return adsMethodPrefix + "StreamAggregatedResources" }
func (sotw) exclusive() bool { return true }
func (sotw) cacheable() bool { return true }

func (sotw) incremental() bool { return false }

func (sotw) resumeRequest(node *corev3.Node, typeURL string, names []string, version string, _ map[string]string) ([]byte, error) {
	return sotwResumeRequest(node, typeURL, names, version)
}

func (sotw) readRequest(b []byte) (*request, error) { return scanSotwRequest(b) }

func (sotw) observeRequest(o *observer, req *request) {
	if req.nonce != "" {
		o.answered(req.nonce, req.nack, req.errMsg)
	}
}

func (sotw) readResponse(b []byte) (*pendingResponse, string, error) { return scanSotwResponse(b) }

func (sotw) cacheServer(s *lkgcache.Snapshot) cacheServer {
	return &sotwCache{snap: s, sent: map[string]string{}}
}

// sotwCache answers each type, and each change of the names asked for.
type sotwCache struct {
	snap *lkgcache.Snapshot
	sent map[string]string // type URL -> names answered for
	n    int
}

func (c *sotwCache) answer(req *request) []byte {
	t := req.typeURL
	names := slices.Sorted(slices.Values(req.subscribe))
	key := strings.Join(names, "\x00")
	if prev, ok := c.sent[t]; ok && prev == key {
		return nil // an ACK or a NACK of the last answer
	}
	c.sent[t] = key
	c.n++
	version := fmt.Sprintf("zoneproxy-lkg-%d", c.snap.WrittenAt.Unix())
	all := len(names) == 0 || slices.Contains(names, "*")
	var res []lkgcache.Resource
	if ts := c.snap.Type(t); ts != nil {
		if ts.Version != "" {
			version = ts.Version
		}
		for _, r := range ts.Resources {
			if all || slices.Contains(names, r.Name) {
				res = append(res, r)
			}
		}
	}
	return sotwResponseBytes(t, version, fmt.Sprintf("zoneproxy-lkg-%d", c.n), res)
}
