package controlplane

import (
	"fmt"
	"net/http"
)

// The kuma-cp releases the test control plane models (Options.Kuma).
const (
	// Kuma30 is kuma-cp 3.0: delta ADS only; a SotW stream is refused as
	// gRPC refuses an unregistered method (Unimplemented), or accepted and
	// never answered with Options.SotWNeverAnswered (master 348b6528).
	Kuma30 = "3.0"
	// Kuma214 is kuma-cp 2.14.3: the bootstrap's ADS is SotW unless the
	// request advertises feature-delta-grpc, and both protocols are served.
	Kuma214 = "2.14"
)

// kumaReleases is the kuma-cp version each mode stands for, as kuma-cp's
// own Build.Version that the version compatibility rule compares with.
var kumaReleases = map[string]string{Kuma30: "3.0.0", Kuma214: "2.14.3"}

// resolveKuma gives the mode Options.Kuma names; empty is Kuma30.
func resolveKuma(k string) (string, error) {
	if k == "" {
		return Kuma30, nil
	}
	if _, ok := kumaReleases[k]; !ok {
		return "", fmt.Errorf("controlplane: Options.Kuma %q is not a modelled release: use %q or %q", k, Kuma30, Kuma214)
	}
	return k, nil
}

// Kuma is the release this control plane models now (Kuma30 or Kuma214);
// Upgrade changes it.
func (s *Server) Kuma() string { return *s.kuma.Load() }

// KumaVersion is the kuma-cp version it stands for ("3.0.0", "2.14.3").
func (s *Server) KumaVersion() string { return kumaReleases[s.Kuma()] }

// servesSotW: kuma-cp 2.14 wires its callbacks for SotW ADS too.
func (s *Server) servesSotW() bool { return s.Kuma() == Kuma214 }

// KumaInfo is GET /version.
type KumaInfo struct {
	Kuma    string `json:"kuma"`    // the mode: "3.0" or "2.14"
	Version string `json:"version"` // kuma-cp's version: "3.0.0" or "2.14.3"
	SotW    bool   `json:"sotw"`    // SotW ADS streams are served
}

func (s *Server) adminVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, KumaInfo{Kuma: s.Kuma(), Version: s.KumaVersion(), SotW: s.servesSotW()})
}
