package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/bootstrap"
	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

// The floor must do what it stands for: a real bootstrap from the control
// plane, written where Envoy is told to read it, and Envoy exec'd.
func TestFloorBootstrapsAndExecsEnvoy(t *testing.T) {
	dir := t.TempDir()
	cp, err := controlplane.Start(controlplane.Options{Dir: filepath.Join(dir, "cp"), Meshes: []string{"payments"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	request := func(mesh string) string {
		cfg := &config.Config{Mesh: mesh, Role: config.RoleEgress, Address: "127.0.0.1", EgressPort: 10002, AdminPort: 9901}
		cfg.Complete(config.Host{Hostname: "vm1"})
		tok, err := cp.IssueToken(controlplane.TokenRequest{Mesh: mesh, Name: cfg.Name})
		if err != nil {
			t.Fatal(err)
		}
		body, err := json.Marshal(&bootstrap.Request{Mesh: mesh, Name: cfg.Name, ProxyType: "dataplane",
			DataplaneToken: tok, DataplaneResource: cfg.Dataplane().JSON(),
			Version: bootstrap.Version{Envoy: bootstrap.EnvoyVersion{Version: "1.39.0", KumaDpCompatible: true}}})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, mesh+".json")
		if err := os.WriteFile(path, body, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	argsFile := filepath.Join(dir, "envoy-args")
	envoy := filepath.Join(dir, "envoy")
	if err := os.WriteFile(envoy, []byte("#!/bin/sh\necho \"$@\" > "+argsFile+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wd := filepath.Join(dir, "wd")
	if err := run(cp.URL(), cp.CACertFile(), request("payments"), envoy, wd); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(wd, "bootstrap.yaml"))
	if err != nil || !strings.Contains(string(doc), "admin") {
		t.Fatalf("bootstrap.yaml: %v\n%s", err, doc)
	}
	args, err := os.ReadFile(argsFile)
	if want := "--config-path " + filepath.Join(wd, "bootstrap.yaml") + "\n"; err != nil || string(args) != want {
		t.Errorf("Envoy ran with %q (%v), want %q", args, err, want)
	}

	// A refusal is an error, and Envoy is not run on it.
	os.Remove(argsFile)
	err = run(cp.URL(), cp.CACertFile(), request("absent"), envoy, filepath.Join(dir, "wd2"))
	if err == nil || !strings.Contains(err.Error(), "422") {
		t.Errorf("mesh missing: %v, want the control plane's 422", err)
	}
	if _, statErr := os.Stat(argsFile); statErr == nil {
		t.Error("Envoy ran after a refusal")
	}
}
