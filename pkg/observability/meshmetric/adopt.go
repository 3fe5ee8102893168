package meshmetric

import (
	"errors"
	"fmt"
	"net"
	"os"
)

// File is a duplicate of the listening socket, to hand to the agent's
// next program (pkg/host/reexec): scrapes that arrive meanwhile wait in
// its queue. The caller closes it.
func (s *Server) File() (*os.File, error) {
	ul, ok := s.ln.(*net.UnixListener)
	if !ok {
		return nil, errors.New("meshmetric: not a unix listener")
	}
	return ul.File()
}

// ServeOn serves on ln, the socket at opts.Path an earlier program of this
// process listened on and handed over (File); Close removes opts.Path as
// Serve's does.
func ServeOn(opts Options, ln net.Listener) (*Server, error) {
	if opts.Path == "" || opts.Stats == nil {
		return nil, errors.New("meshmetric: Options.Path and Options.Stats are required")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	ul, ok := ln.(*net.UnixListener)
	if !ok || ul.Addr().String() != opts.Path {
		return nil, fmt.Errorf("meshmetric: the handed-over listener is not the socket %s", opts.Path)
	}
	ul.SetUnlinkOnClose(false)
	return serveOn(opts, ln), nil
}
