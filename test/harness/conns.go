package harness

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

var errHelloSent = errors.New("client hello sent")

// helloOnly lets a TLS client write its ClientHello and ends the handshake
// there: nobody answers on a zone listener that only passes SNI through.
type helloOnly struct{ net.Conn }

func (helloOnly) Read([]byte) (int, error) { return 0, errHelloSent }

// DialTLSHello connects to addr and sends a TLS ClientHello naming
// serverName, as a zone proxy's clients do, without waiting for an answer.
// Envoy's tls_inspector holds a socket until a ClientHello arrives, so
// only such a connection counts as downstream_cx_active. It stays open
// until the caller closes it.
func DialTLSHello(addr, serverName string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	err = tls.Client(helloOnly{c}, &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}).Handshake()
	if !errors.Is(err, errHelloSent) {
		c.Close()
		return nil, fmt.Errorf("sending a ClientHello to %s: %v", addr, err)
	}
	return c, nil
}

// zoneListenerActive is the listener-wide connection gauge of a zone
// listener, which kuma-cp names by stat_prefix (not the per-worker ones).
var zoneListenerActive = regexp.MustCompile(`^listener\.self_zone(?:ingress|egress)_dp_[^.]+\.downstream_cx_active: (\d+)$`)

// ZoneConnections is the number of connections Envoy, whose admin socket
// is in workDir, holds on its zone listeners.
func ZoneConnections(workDir string) (int64, error) {
	_, body, err := EnvoyAdmin(workDir, "GET", "/stats?filter=downstream_cx_active")
	if err != nil {
		return 0, err
	}
	var n int64
	for _, line := range strings.Split(body, "\n") {
		if m := zoneListenerActive.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			n += v
		}
	}
	return n, nil
}

// HoldConnection opens a client connection to p's zone listener for role
// ("ingress" or "egress") and waits until Envoy counts it. It is closed
// at cleanup.
func (z *Zone) HoldConnection(p Proxy, role string) net.Conn {
	z.t.Helper()
	port := p.Egress
	if role == "ingress" {
		port = p.Ingress
	}
	before, _ := ZoneConnections(p.WorkDir)
	c, err := DialTLSHello(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), controlplane.DestinationSNI(p.Mesh, role))
	if err != nil {
		z.t.Fatal(err)
	}
	z.t.Cleanup(func() { c.Close() })
	Eventually(z.t, 30*time.Second, "Envoy to count the "+role+" connection", func() bool {
		n, err := ZoneConnections(p.WorkDir)
		return err == nil && n > before
	})
	return c
}
