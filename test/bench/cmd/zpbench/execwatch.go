package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// execWatch records the kernel's exec events (the proc connector), so that
// "exec → Envoy launched" runs from the agent's execve to Envoy's execve as
// the kernel stamps them, with nothing of the bench's own fork or the
// wrapper's shell inside. It needs CAP_NET_ADMIN; without it the bench
// falls back to the wrapper's stamps and says so.
type execWatch struct {
	fd int

	mu    sync.Mutex
	execs map[int][]uint64 // pid → CLOCK_MONOTONIC ns of each exec, in order
	err   error
}

// The proc connector's wire constants (linux/connector.h, linux/cn_proc.h).
const (
	cnIdxProc         = 1
	cnValProc         = 1
	procCnMcastListen = 1
	procEventExec     = 0x00000002
	nlmsgHdrLen       = 16
	cnMsgLen          = 20
)

func watchExecs() (*execWatch, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("netlink connector socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind to the proc connector: %w", err)
	}
	if err := unix.Send(fd, listenRequest(), 0); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("subscribe to exec events: %w", err)
	}
	w := &execWatch{fd: fd, execs: map[int][]uint64{}}
	go w.read()
	return w, nil
}

func listenRequest() []byte {
	msg := make([]byte, nlmsgHdrLen+cnMsgLen+4)
	le := binary.LittleEndian
	le.PutUint32(msg[0:], uint32(len(msg)))
	le.PutUint16(msg[4:], unix.NLMSG_DONE)
	le.PutUint32(msg[nlmsgHdrLen:], cnIdxProc)
	le.PutUint32(msg[nlmsgHdrLen+4:], cnValProc)
	le.PutUint16(msg[nlmsgHdrLen+16:], 4)
	le.PutUint32(msg[nlmsgHdrLen+cnMsgLen:], procCnMcastListen)
	return msg
}

func (w *execWatch) read() {
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(w.fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			w.mu.Lock()
			if w.err == nil && !errors.Is(err, unix.EBADF) {
				w.err = fmt.Errorf("reading exec events: %w", err)
			}
			w.mu.Unlock()
			return
		}
		for _, ev := range parseExecEvents(buf[:n]) {
			w.mu.Lock()
			w.execs[ev.pid] = append(w.execs[ev.pid], ev.ns)
			w.mu.Unlock()
		}
	}
}

type execEvent struct {
	pid int
	ns  uint64
}

// parseExecEvents reads the exec events out of one netlink datagram:
// nlmsghdr, cn_msg, then proc_event {what, cpu, timestamp_ns, pid, tgid}.
func parseExecEvents(b []byte) []execEvent {
	var out []execEvent
	le := binary.LittleEndian
	for len(b) >= nlmsgHdrLen {
		size := int(le.Uint32(b))
		if size < nlmsgHdrLen || size > len(b) {
			return out
		}
		msg := b[nlmsgHdrLen:size]
		b = b[(size+3)&^3:]
		if len(msg) < cnMsgLen+24 || le.Uint32(msg) != cnIdxProc || le.Uint32(msg[4:]) != cnValProc {
			continue
		}
		ev := msg[cnMsgLen:]
		if le.Uint32(ev) != procEventExec {
			continue
		}
		// The thread group, not the thread: a Go program may exec from any thread.
		out = append(out, execEvent{pid: int(int32(le.Uint32(ev[20:]))), ns: le.Uint64(ev[8:])})
		if len(b) < nlmsgHdrLen {
			break
		}
	}
	return out
}

// firstExecAfter is the first exec of pid stamped at or after ns, waiting
// up to timeout for the event to be read.
func (w *execWatch) firstExecAfter(pid int, after uint64, timeout time.Duration) (uint64, error) {
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		for _, ns := range w.execs[pid] {
			if ns >= after {
				w.mu.Unlock()
				return ns, nil
			}
		}
		err := w.err
		w.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no exec event for pid %d within %s", pid, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

func (w *execWatch) close() { unix.Close(w.fd) }

// monoNow is CLOCK_MONOTONIC, the clock of the kernel's exec stamps.
func monoNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// wallTime converts a CLOCK_MONOTONIC stamp to wall time, to line it up
// with the agent's log timestamps.
func wallTime(mono uint64) time.Time {
	now, m := time.Now(), monoNow()
	return now.Add(-time.Duration(m - mono))
}
