package relay

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// upstream is one stream to the control plane on its own connection, so
// closing it ends the stream on the control plane at once and every new
// stream dials afresh (this relay's backoff, not grpc-go's, paces retries).
type upstream struct {
	r       *Relay
	conn    *grpc.ClientConn
	stream  grpc.ClientStream
	cancel  context.CancelFunc
	certErr atomic.Pointer[error] // the control plane's certificate was refused
	// superseded: closed because a newer stream of this node opened.
	superseded atomic.Bool
	// held: kuma-cp refused the stream as it still holds this node's
	// previous one; the connection is kept for the next attempt.
	held      atomic.Bool
	closeOnce sync.Once
	// answered: the control plane sent a response; closed: close ran.
	answered, closed atomic.Bool

	// A handover (handover.go) moves the stream from one Envoy session to
	// another: target is the session the control plane's responses go to,
	// changed only under deliver; pumped carries the pump's end to
	// whichever session owns the stream then.
	deliver  sync.Mutex
	target   *session
	pumpOnce sync.Once
	pumped   chan error
	sendMu   sync.Mutex // during a handover two sessions may send
	unlink   func() bool
}

func (u *upstream) send(b []byte) error {
	u.sendMu.Lock()
	defer u.sendMu.Unlock()
	return u.stream.SendMsg(&frame{b: b})
}

func (u *upstream) recv() ([]byte, error) {
	f := &frame{}
	if err := u.stream.RecvMsg(f); err != nil {
		return nil, u.ended(err)
	}
	u.answered.Store(true)
	return f.b, nil
}

// recvFrame receives a message without copying it; the caller frees it.
func (u *upstream) recvFrame() (*receivedFrame, error) {
	f := &receivedFrame{}
	if err := u.stream.RecvMsg(f); err != nil {
		return nil, u.ended(err)
	}
	u.answered.Store(true)
	return f, nil
}

// ended notes how the stream ended and returns err.
func (u *upstream) ended(err error) error {
	if isHeld(err) {
		u.held.Store(true)
	}
	return err
}

// finalStatus is the ended stream's status; responses before it are
// dropped, as the stream counts as never opened.
func (u *upstream) finalStatus() error {
	for {
		if _, err := u.recv(); err != nil {
			return err
		}
	}
}

func (u *upstream) close() {
	u.closeOnce.Do(func() {
		u.closed.Store(true)
		u.unlink()
		u.cancel()
		switch {
		case u.conn == nil:
		case u.held.Load() && u.r != nil:
			u.r.spare.put(u.conn)
		default:
			_ = u.conn.Close()
		}
	})
}

// spareConn keeps the connection of a refused stream for the next
// attempt: retries while kuma-cp holds the node's previous stream then
// cost it no TLS handshake.
type spareConn struct {
	mu   sync.Mutex
	conn *grpc.ClientConn
}

func (s *spareConn) put(c *grpc.ClientConn) {
	s.mu.Lock()
	old := s.conn
	s.conn = c
	s.mu.Unlock()
	if old != nil && old != c {
		_ = old.Close()
	}
}

// take returns the spare connection, nil if there is none that works.
func (s *spareConn) take() *grpc.ClientConn {
	s.mu.Lock()
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	if st := c.GetState(); st == connectivity.Shutdown || st == connectivity.TransientFailure {
		_ = c.Close()
		return nil
	}
	return c
}

func (s *spareConn) drop() { s.put(nil) }

// errCertificate marks a control plane whose certificate this relay does
// not trust: misconfiguration, not an outage.
var errCertificate = errors.New("the control plane's certificate is not trusted")

// dialUpstream opens a stream of method with a fresh token; replay is sent
// first, in order.
func (r *Relay) dialUpstream(ctx context.Context, method string, replay [][]byte) (*upstream, error) {
	tok, err := r.opts.Token()
	if err != nil {
		return nil, &tokenError{err}
	}
	// The stream ends with ctx, the opening session's, unless a handover
	// links it to the session that takes it over (handover.go).
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	u := &upstream{r: r, cancel: cancel, pumped: make(chan error, 1)}
	u.unlink = context.AfterFunc(ctx, cancel)
	if u.conn = r.spare.take(); u.conn == nil {
		if u.conn, err = r.newConn(u); err != nil {
			cancel()
			return nil, status.Error(codes.Unavailable, err.Error())
		}
	}
	md := metadata.MD{}
	for _, h := range r.opts.Upstream.Metadata {
		md.Append(h.Key, h.Value)
	}
	md.Set("authorization", tok)
	u.stream, err = u.conn.NewStream(metadata.NewOutgoingContext(sctx, md),
		&grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
	if err == nil {
		for _, b := range replay {
			if err = u.send(b); err != nil {
				err = u.finalStatus()
				break
			}
		}
	}
	if err != nil {
		u.close()
		if ce := u.certErr.Load(); ce != nil {
			return nil, *ce
		}
		return nil, err
	}
	return u, nil
}

type tokenError struct{ err error }

func (e *tokenError) Error() string { return "reading the dataplane token: " + e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }

// tlsConfig verifies the control plane as its bootstrap told Envoy to: the
// CA, and an exact DNS or IP SAN equal to the server name.
func (r *Relay) tlsConfig(u *upstream) *tls.Config {
	name := r.opts.Upstream.ServerName
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         name,
		InsecureSkipVerify: true, // replaced by VerifyConnection: exact SAN, not hostname rules
		VerifyConnection: func(cs tls.ConnectionState) error {
			err := verifyPeer(cs.PeerCertificates, r.roots, name)
			if err != nil {
				err = fmt.Errorf("%w: %v", errCertificate, err)
				u.certErr.Store(&err)
			}
			return err
		},
	}
}

func verifyPeer(chain []*x509.Certificate, roots *x509.CertPool, name string) error {
	if len(chain) == 0 {
		return errors.New("no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	leaf := chain[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return err
	}
	if slices.Contains(leaf.DNSNames, name) {
		return nil
	}
	if ip := net.ParseIP(name); ip != nil && slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
		return nil
	}
	return fmt.Errorf("it names %v %v, not %s", leaf.DNSNames, leaf.IPAddresses, name)
}

// newConn makes a connection to the control plane; u hears of a
// certificate it refuses.
func (r *Relay) newConn(u *upstream) (*grpc.ClientConn, error) {
	creds := credentials.NewTLS(r.tlsConfig(u))
	maxRecv := r.opts.MaxResponseBytes
	if m := r.opts.Upstream.MaxReceiveMessageLength; m > 0 && m < maxRecv {
		maxRecv = m
	}
	addr := r.opts.Upstream.Address
	return grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			d := net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 10 * time.Second, Count: 3}}
			return d.DialContext(ctx, "tcp", addr)
		}),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: r.opts.ConnectTimeout}),
		// HTTP/2 pings show a control plane that stopped answering (keepalive.go).
		grpc.WithKeepaliveParams(upstreamKeepalive),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecv), grpc.ForceCodecV2(rawCodec{})),
		// Large windows: a snapshot of megabytes arrives in one round trip.
		grpc.WithInitialWindowSize(16<<20), grpc.WithInitialConnWindowSize(16<<20),
		experimental.WithBufferPool(relayPool),
	)
}
