package cli

import (
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/bootstrap"
	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// run opens the control plane's connection before it validates the
// configuration, so that the handshake overlaps the validation.
func TestRunDialsTheControlPlaneBeforeValidating(t *testing.T) {
	accepted := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{CPAddress: srv.URL, CACertFile: ca}

	var cp *bootstrap.Client
	defer func() { cp.Close() }()
	sawDial := false
	validate := dialAheadThen(func(*config.Config, *source) ([]config.Warning, error) {
		select {
		case <-accepted:
			sawDial = true
		case <-time.After(10 * time.Second):
		}
		return nil, nil
	}, &cp)
	if _, err := validate(cfg, nil); err != nil {
		t.Fatal(err)
	}
	if !sawDial || cp == nil {
		t.Errorf("validation ran without the control plane's connection under way (client %v)", cp)
	}
}

// A CA file that cannot be read leaves the client to the agent, which
// reports it; validation still runs.
func TestRunDialAheadLeavesABrokenCAToTheAgent(t *testing.T) {
	var cp *bootstrap.Client
	ran := false
	validate := dialAheadThen(func(*config.Config, *source) ([]config.Warning, error) { ran = true; return nil, nil }, &cp)
	cfg := &config.Config{CPAddress: "https://127.0.0.1:1", CACertFile: filepath.Join(t.TempDir(), "missing.pem")}
	if _, err := validate(cfg, nil); err != nil || !ran || cp != nil {
		t.Errorf("err %v, validation ran %v, client %v", err, ran, cp)
	}
}

// Once listenForSignals says it is ready, a stop signal waits for the
// agent in its channel instead of killing the process.
func TestSignalsAreCaughtOnceReady(t *testing.T) {
	sigs := listenForSignals()
	<-sigs.ready
	defer signal.Stop(sigs.stop)
	defer signal.Stop(sigs.usr2)
	for sig, ch := range map[syscall.Signal]chan os.Signal{syscall.SIGTERM: sigs.stop, syscall.SIGUSR2: sigs.usr2} {
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-ch:
			if got != sig {
				t.Errorf("sent %v, the channel got %v", sig, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v never reached its channel", sig)
		}
	}
}
