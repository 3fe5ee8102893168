package controlplane

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func TestRestartKeepsPortAndState(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	addr := s.Addr()
	tok, _ := s.IssueToken(TokenRequest{Mesh: "payments"})
	node := nodeFor(t, s, dpJSON(t, "payments", "zp-egress-1", "zp-egress", egressListener), nil)
	c := dialADS(t, s, tok, node)
	c.collect(hasAll(resourcev3.ListenerType, "self_zoneegress_dp_ze-port"))

	done := make(chan error, 1)
	go func() { done <- s.Restart(300 * time.Millisecond) }()
	select {
	case err := <-c.errc:
		if st, _ := status.FromError(err); st.Code() == codes.OK {
			t.Errorf("stream ended without an error status: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stream survived the restart")
	}
	if !refused(addr) {
		t.Errorf("DP port accepts connections while down")
	}
	eventually(t, "proxy marked disconnected", func() bool {
		ps := s.Proxies()
		return len(ps) == 1 && !ps[0].Connected
	})
	if err := <-done; err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if s.Addr() != addr {
		t.Errorf("address changed %s -> %s", addr, s.Addr())
	}
	// Same token and mesh still work: state survives.
	dialADS(t, s, tok, node).collect(hasAll(resourcev3.ListenerType, "self_zoneegress_dp_ze-port"))
	eventually(t, "proxy reconnected", func() bool {
		ps := s.Proxies()
		return len(ps) == 1 && ps[0].Connected
	})
}

func TestRefuseConnections(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	addr := s.Addr()
	c := httpClient(t, s, true)
	body := mustJSON(t, bootstrapBody("payments", "zp", "tok", dpJSON(t, "payments", "zp", "", egressListener)))

	s.SetFaults(Faults{RefuseConnections: true})
	if !refused(addr) {
		t.Fatal("connections are not refused")
	}
	s.SetFaults(Faults{})
	if r := post(t, c, "https://"+addr+"/bootstrap", body, "application/json"); r.status != 200 {
		t.Errorf("after clearing: %d %s", r.status, r.body)
	}
	if s.Addr() != addr {
		t.Errorf("address changed")
	}
}

func TestBootstrapFaults(t *testing.T) {
	s := startTestServer(t, Options{Meshes: []string{"payments"}})
	c := httpClient(t, s, true)
	body := mustJSON(t, bootstrapBody("payments", "zp", "tok", dpJSON(t, "payments", "zp", "", egressListener)))

	s.SetFaults(Faults{BootstrapStatus: 503})
	r := post(t, c, s.URL()+"/bootstrap", body, "application/json")
	if r.status != 503 || string(r.body) != "fault injected: status 503" {
		t.Errorf("status fault: %d %q", r.status, r.body)
	}

	s.SetFaults(Faults{BootstrapDelay: 200 * time.Millisecond})
	start := time.Now()
	r = post(t, c, s.URL()+"/bootstrap", body, "application/json")
	if r.status != 200 || time.Since(start) < 200*time.Millisecond {
		t.Errorf("delay fault: %d after %s", r.status, time.Since(start))
	}

	s.SetFaults(Faults{})
	recs := s.BootstrapRequests()
	if len(recs) != 2 || recs[0].Status != 503 || recs[1].Status != 200 {
		t.Errorf("records %+v", recs)
	}
}
