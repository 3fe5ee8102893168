package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
)

// hotRestartSockets are the datagram sockets Envoy's HotRestartImpl binds
// unless --disable-hot-restart: HotRestartingChild's, then
// HotRestartingParent's, each with a "_udp" twin, named
// <socket-path>_<role>_<base id * 10 + epoch % 3>. The default path is
// abstract, so within one network namespace a second Envoy with the same
// base id cannot start: that is why Envoys that run side by side need
// --disable-hot-restart (or distinct base ids).
type hotRestartSockets []int

func (h hotRestartSockets) close() {
	for _, fd := range h {
		syscall.Close(fd)
	}
}

// errHotRestartInUse is HotRestartDomainSocketInUseException: another
// Envoy holds the base id.
var errHotRestartInUse = errors.New("hot restart domain socket in use")

type hotRestartError struct {
	msg   string
	inUse bool
}

func (e *hotRestartError) Error() string { return e.msg }
func (e *hotRestartError) Unwrap() error {
	if e.inUse {
		return errHotRestartInUse
	}
	return nil
}

// claimHotRestart binds the hot restart sockets as MainCommonBase does
// before the server is built: with --use-dynamic-base-id it tries up to
// 100 random base ids ("unable to select a dynamic base id" after that).
// It returns the base id used.
func claimHotRestart(o *options) (hotRestartSockets, uint32, error) {
	if o.disableHotRestart {
		return nil, o.baseID, nil
	}
	if !o.useDynamicBaseID {
		socks, err := bindHotRestart(o, o.baseID)
		return socks, o.baseID, err
	}
	for range 100 {
		// Envoy multiplies it by 10, so it leaves head room.
		id := rand.Uint32() & 0x0FFFFFFF
		socks, err := bindHotRestart(o, id)
		if err == nil {
			return socks, id, nil
		}
		if !errors.Is(err, errHotRestartInUse) {
			return nil, 0, err
		}
	}
	return nil, 0, errors.New("unable to select a dynamic base id")
}

func bindHotRestart(o *options, baseID uint32) (hotRestartSockets, error) {
	var socks hotRestartSockets
	scaled := uint64(baseID) * 10
	for _, role := range []string{"child", "parent"} {
		for _, path := range []string{o.socketPath, o.socketPath + "_udp"} {
			id := uint64(o.restartEpoch)
			name := fmt.Sprintf("%s_%s_%d", path, role, scaled+id%3)
			fd, err := bindDatagram(name)
			if err != nil {
				socks.close()
				var errno syscall.Errno
				errors.As(err, &errno)
				msg := fmt.Sprintf("unable to bind domain socket with base_id=%d, id=%d, errno=%d (see --base-id option)", scaled, id, int(errno))
				return nil, &hotRestartError{msg: msg, inUse: errno == syscall.EADDRINUSE}
			}
			socks = append(socks, fd)
		}
	}
	return socks, nil
}

func bindDatagram(name string) (int, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if !strings.HasPrefix(name, "@") {
		os.Remove(name) // Envoy unlinks a path socket before its bind
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: name}); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}
