package relay

import (
	"context"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// peerCreds reads which process connected to the relay's socket
// (SO_PEERCRED), so that a handover tells the new Envoy's stream from the
// serving one's. Nothing is encrypted or authenticated: the socket is
// 0600 in the work dir.
type peerCreds struct{}

type peerInfo struct {
	credentials.CommonAuthInfo
	pid int
}

func (peerInfo) AuthType() string { return "peercred" }

func (peerCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	info := peerInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}
	if uc, ok := c.(*net.UnixConn); ok {
		if raw, err := uc.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) {
				if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
					info.pid = int(cred.Pid)
				}
			})
		}
	}
	return c, info, nil
}

func (peerCreds) ClientHandshake(_ context.Context, _ string, c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c, peerInfo{}, nil
}

func (peerCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "insecure"}
}

func (peerCreds) Clone() credentials.TransportCredentials { return peerCreds{} }

func (peerCreds) OverrideServerName(string) error { return nil }

// peerPID is the process at the other end of a stream, 0 if unknown.
func peerPID(ctx context.Context) int {
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(peerInfo); ok {
			return info.pid
		}
	}
	return 0
}

// pgid is pid's process group, 0 if it is gone.
func pgid(pid int) int {
	g, err := syscall.Getpgid(pid)
	if err != nil {
		return 0
	}
	return g
}
