package procnet

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
)

func TestParseAddr(t *testing.T) {
	cases := []struct{ in, want string }{
		{"0100007F:26AE", "127.0.0.1:9902"},
		{"00000000:0050", "0.0.0.0:80"},
		{"00000000000000000000000001000000:26AE", "[::1]:9902"},
		{"0000000000000000FFFF00000100007F:26AE", "[::ffff:127.0.0.1]:9902"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseAddr(tc.in)
			if err != nil || got != netip.MustParseAddrPort(tc.want) {
				t.Fatalf("got %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// This process's own listener is in the table, with its uid, and held by
// this process.
func TestSocketsAndHolders(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().(*net.TCPAddr).AddrPort()
	socks, err := Sockets()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(socks, func(s Socket) bool { return s.State == Listen && Same(s.Local, addr) })
	if i < 0 {
		t.Fatalf("%s not among %d sockets", addr, len(socks))
	}
	s := socks[i]
	if s.UID != uint32(os.Geteuid()) || s.Inode == 0 {
		t.Fatalf("%+v: want uid %d and an inode", s, os.Geteuid())
	}
	holders := Holders([]uint64{s.Inode})[s.Inode]
	if !slices.ContainsFunc(holders, func(p Process) bool { return p.PID == os.Getpid() && p.Comm != "" }) {
		t.Fatalf("holders %+v, want this process (%d)", holders, os.Getpid())
	}
}

// A listener keeps a bind from succeeding on the same port at the same
// address, or where either is a wildcard; IPv4 and IPv6 apart, but for the
// IPv6 wildcard.
func TestListeningSocketsThatKeepABindFromSucceeding(t *testing.T) {
	tests := []struct {
		holder, target string
		want           bool
	}{
		{"127.0.0.1", "127.0.0.1", true},
		{"0.0.0.0", "127.0.0.1", true},
		{"127.0.0.1", "0.0.0.0", true},
		{"127.0.0.2", "127.0.0.1", false},
		{"::", "127.0.0.1", true}, // dual-stack wildcard
		{"::1", "0.0.0.0", false},
		{"0.0.0.0", "::1", false},
		{"0.0.0.0", "::", true},
		{"::ffff:127.0.0.1", "127.0.0.1", true},
	}
	if n := len(Conflicting([]Socket{{Local: netip.MustParseAddrPort("127.0.0.1:9903"), State: Listen}}, netip.MustParseAddr("127.0.0.1"), 9902)); n != 0 {
		t.Errorf("a listener on another port blocks: %d", n)
	}
	if n := len(Conflicting([]Socket{{Local: netip.MustParseAddrPort("127.0.0.2:9902"), State: Listen}}, netip.Addr{}, 9902)); n != 1 {
		t.Errorf("a host name's port is not matched on the port alone: %d", n)
	}
	for _, tt := range tests {
		socks := []Socket{{Local: netip.AddrPortFrom(netip.MustParseAddr(tt.holder), 9902), State: Listen}}
		if got := len(Conflicting(socks, netip.MustParseAddr(tt.target), 9902)) == 1; got != tt.want {
			t.Errorf("a listener on %s blocks %s: %v, want %v", tt.holder, tt.target, got, tt.want)
		}
	}
}
