package main

import (
	"encoding/binary"
	"os/exec"
	"testing"
	"time"
)

// execDatagram builds one proc connector message as the kernel sends it.
func execDatagram(what uint32, tgid int32, ns uint64) []byte {
	msg := make([]byte, nlmsgHdrLen+cnMsgLen+40)
	le := binary.LittleEndian
	le.PutUint32(msg, uint32(len(msg)))
	le.PutUint32(msg[nlmsgHdrLen:], cnIdxProc)
	le.PutUint32(msg[nlmsgHdrLen+4:], cnValProc)
	ev := msg[nlmsgHdrLen+cnMsgLen:]
	le.PutUint32(ev, what)
	le.PutUint64(ev[8:], ns)
	le.PutUint32(ev[16:], uint32(tgid+1)) // the thread that called execve
	le.PutUint32(ev[20:], uint32(tgid))
	return msg
}

func TestParseExecEvents(t *testing.T) {
	two := append(execDatagram(procEventExec, 41, 7), execDatagram(procEventExec, 42, 9)...)
	for _, tc := range []struct {
		name string
		in   []byte
		want []execEvent
	}{
		{"exec, by thread group", execDatagram(procEventExec, 41, 7), []execEvent{{41, 7}}},
		{"fork is not an exec", execDatagram(1, 41, 7), nil},
		{"two in one datagram", two, []execEvent{{41, 7}, {42, 9}}},
		{"truncated", execDatagram(procEventExec, 41, 7)[:30], nil},
	} {
		got := parseExecEvents(tc.in)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			}
		}
	}
}

// The kernel's stamp of a real exec falls between the clock readings
// around it; skipped where the proc connector is not allowed (not root).
func TestExecWatchSeesAnExec(t *testing.T) {
	w, err := watchExecs()
	if err != nil {
		t.Skipf("no exec events here: %v", err)
	}
	defer w.close()
	before := monoNow()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	after := monoNow()
	ns, err := w.firstExecAfter(cmd.Process.Pid, before, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ns < before || ns > after {
		t.Errorf("exec stamped at %d, outside [%d, %d]", ns, before, after)
	}
	if d := time.Since(wallTime(ns)); d < 0 || d > time.Minute {
		t.Errorf("exec's wall time %s ago", d)
	}
}
