package localserver

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/host/preflight/procnet"
)

// hostPolicy decides which Host headers a listener answers.
type hostPolicy struct {
	// anyIP: every IP literal, not only loopback ones (the metrics
	// listener, which other hosts reach on any of this host's addresses).
	anyIP bool
	// answers and hint say, in the refusal, what is answered and how to
	// ask instead.
	answers, hint string
}

// allows reports whether host (a Host header, with or without a port) is
// one the listener answers: "localhost", an IP literal (a loopback one on
// the loopback listener), or none (HTTP/1.0 without Host). Any other name
// is what a DNS-rebinding page sends: a name its author controls, pointed
// at 127.0.0.1 (or at this host) once the page is loaded, so that the
// browser lets the page read the answers.
func (p hostPolicy) allows(host string) bool {
	if host == "" {
		return true
	}
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]") // no port
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return false
	}
	return p.anyIP || ip.Unmap().IsLoopback()
}

var (
	loopbackHosts = hostPolicy{answers: "localhost or a loopback address", hint: "ask by 127.0.0.1 or localhost, e.g. curl http://127.0.0.1:<" + string(config.KeyReadinessPort) + ">/ready"}
	metricsHosts  = hostPolicy{anyIP: true, answers: "localhost or an IP address", hint: "scrape it by IP address (a Prometheus target such as 10.0.0.5:9903)"}
	healthHosts   = hostPolicy{anyIP: true, answers: "localhost or an IP address", hint: "probe it by IP address (a load balancer target such as 10.0.0.5:9904)"}
)

// checkHost refuses, with 421, a request whose Host is a name this agent
// does not answer to (see hostPolicy.allows).
func checkHost(p hostPolicy, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.allows(r.Host) {
			http.Error(w, fmt.Sprintf("refused: Host %q is not a name of this agent's endpoint (only %s is answered, so that a web page cannot read it through DNS rebinding): %s",
				r.Host, p.answers, p.hint), http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// isChange: every method but GET and HEAD asks for a change (POST /drain,
// /undrain, /logging).
func isChange(r *http.Request) bool { return r.Method != http.MethodGet && r.Method != http.MethodHead }

// refuseWebPages turns away changes that a browser on this host makes for
// a web page: it sends an Origin header, curl and zoneproxy's own commands
// do not. Loopback alone would let any page the operator opens drain the
// proxy.
func refuseWebPages(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isChange(r) && r.Header.Get("Origin") != "" {
			http.Error(w, "refused: a request from a web page (Origin "+r.Header.Get("Origin")+") may not change the agent", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// peerUID is the uid that owns the client's end of r's connection.
// Variable for tests.
var peerUID = tcpPeerUID

// agentUID is the agent's own (effective) uid. Variable for tests.
var agentUID = func() uint32 { return uint32(os.Geteuid()) }

// onlyOwner lets only root and the agent's own user change the agent:
// drain it, undrain it, change its log levels. Any local user can reach
// a loopback TCP port, and TCP has no SO_PEERCRED; the kernel's socket
// table says who owns the client's socket. When it cannot tell, the
// change is refused.
func onlyOwner(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isChange(r) {
			h.ServeHTTP(w, r)
			return
		}
		own := agentUID()
		allowed := "root or this agent's user, uid " + uidName(own) + ","
		if own == 0 {
			allowed = "root, this agent's user,"
		}
		uid, err := peerUID(r)
		switch {
		case err != nil:
			http.Error(w, fmt.Sprintf("refused: cannot tell which user sent %s %s (%v); only %s may drain, undrain, reload or change log levels",
				r.Method, r.URL.Path, err, allowed), http.StatusForbidden)
			return
		case uid != 0 && uid != own:
			http.Error(w, fmt.Sprintf("refused: %s %s comes from uid %s; only %s may drain, undrain, reload or change log levels: run it with sudo, or as that user",
				r.Method, r.URL.Path, uidName(uid), allowed), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// tcpPeerUID finds the client's socket of r's connection in the kernel's
// TCP tables: the one whose local address is r's remote address and whose
// remote address is the listener's. A line with no inode is refused: the
// client has closed its socket, and a socket in TIME_WAIT shows uid 0
// whoever owned it.
func tcpPeerUID(r *http.Request) (uint32, error) {
	client, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return 0, fmt.Errorf("client address %q: %w", r.RemoteAddr, err)
	}
	la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	ta, ok := la.(*net.TCPAddr)
	if !ok {
		return 0, errors.New("not a TCP connection")
	}
	server := ta.AddrPort()
	socks, err := procnet.Sockets()
	if err != nil {
		return 0, err
	}
	closed := false
	for _, s := range socks {
		if !procnet.Same(s.Local, client) || !procnet.Same(s.Remote, server) {
			continue
		}
		if s.Inode == 0 || s.State == procnet.TimeWait {
			closed = true
			continue
		}
		return s.UID, nil
	}
	if closed {
		return 0, fmt.Errorf("the client's socket %s is closed already", client)
	}
	return 0, fmt.Errorf("no socket %s → %s in %s/self/net/tcp", client, server, procnet.Proc)
}

// uidName is "1001 (alice)", or "1001" when the name is unknown.
func uidName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil && u.Username != "" {
		return id + " (" + u.Username + ")"
	}
	return id
}
