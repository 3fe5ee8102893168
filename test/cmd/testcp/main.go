// Command testcp runs the test control plane (test/controlplane) as a
// process, for `make demo` and manual runs of the agent.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/zoneproxy/zoneproxy/test/controlplane"
)

type meshList []string

func (m *meshList) String() string { return strings.Join(*m, ",") }
func (m *meshList) Set(v string) error {
	if v == "" {
		return fmt.Errorf("mesh name cannot be empty")
	}
	*m = append(*m, v)
	return nil
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("testcp", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory for ca.pem, server.pem and server-key.pem (required)")
	addr := fs.String("addr", "127.0.0.1:5678", "DP server (TLS: /bootstrap, ADS, HDS) listen address")
	adminAddr := fs.String("admin-addr", "127.0.0.1:5681", "plain-HTTP admin API listen address")
	authDisabled := fs.Bool("auth-disabled", false, "accept proxies without a dataplane token (like KUMA_DP_SERVER_AUTHN_DP_PROXY_TYPE=none)")
	reloadable := fs.Bool("reloadable-tokens", false, "with a dataplaneTokenPath, render ADS as google_grpc reading the token file (like KUMA_DP_SERVER_AUTHN_ENABLE_RELOADABLE_TOKENS=true)")
	rsaKey := fs.Bool("rsa-server-key", false, "give the DP server an RSA 2048 key, as kuma-cp's self-signed default certificate has, instead of ECDSA P-256 (slower handshakes)")
	deregistrationDelay := fs.Duration("deregistration-delay", 0, "how long a node stays active (refusing new streams) after its stream closed, before its Dataplane is deleted, like KUMA_XDS_DATAPLANE_DEREGISTRATION_DELAY; 0 = kuma-cp's 10s, negative = none")
	cacheExpiration := fs.Duration("cache-expiration", 0, "sleep after registering a Dataplane before the proxy counts as connected and gets its first response, like KUMA_STORE_CACHE_EXPIRATION_TIME; 0 = kuma-cp's 1s, negative = none")
	egressPropagation := fs.Duration("egress-propagation", 0, "how long a Dataplane change takes to reach the zone's sidecars (GET /meshes/{mesh}/zone-egresses); 0 = 3s (kuma-cp: 2 x store cache expiration + dataplane configuration refresh interval), negative = none")
	services := fs.Int("services", 0, "MeshServices a zone ingress's xDS carries, as kuma-cp sends an ingress of a zone with that many: per service an EDS cluster, its endpoints and a filter chain for its SNI (sni.msvc.<mesh>.default.<name>.http); the first is backend, then svc-00001 and on; 0 = backend alone")
	kuma := fs.String("kuma", controlplane.Kuma30, `kuma-cp release to model: "3.0" (delta ADS only) or "2.14" (kuma-cp 2.14.3: SotW bootstrap and ADS, its version rule)`)
	policies := fs.String("policies", "", `JSON file of policies per zone proxy: {"<mesh>/<name>": {"meshAccessLogs": {...}, "meshMetrics": {...}, "withholdZoneListeners": false}}`)
	var meshes meshList
	fs.Var(&meshes, "mesh", "a mesh that exists at start (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "testcp: --dir is required and no positional arguments are accepted")
		fs.Usage()
		return 2
	}
	if *kuma != controlplane.Kuma30 && *kuma != controlplane.Kuma214 {
		fmt.Fprintf(os.Stderr, "testcp: --kuma %q: use %q or %q\n", *kuma, controlplane.Kuma30, controlplane.Kuma214)
		return 2
	}
	if *services < 0 {
		fmt.Fprintln(os.Stderr, "testcp: --services cannot be negative")
		return 2
	}

	// Catch signals before starting so an early SIGTERM still closes cleanly.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)

	s, err := controlplane.Start(controlplane.Options{
		Dir:              *dir,
		Addr:             *addr,
		AdminAddr:        *adminAddr,
		Meshes:           meshes,
		AuthDisabled:     *authDisabled,
		Log:              os.Stderr,
		ReloadableTokens: *reloadable,
		RSAServerKey:     *rsaKey,

		DeregistrationDelay: *deregistrationDelay,
		CacheExpiration:     *cacheExpiration,
		EgressPropagation:   *egressPropagation,
		Services:            *services,
		Kuma:                *kuma,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcp: %v\n", err)
		return 1
	}
	if *policies != "" {
		data, err := os.ReadFile(*policies)
		if err == nil {
			err = s.LoadPolicies(data)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "testcp: --policies: %v\n", err)
			s.Close()
			return 2
		}
	}
	fmt.Printf("testcp ready dp=%s admin=%s ca=%s\n", s.URL(), s.AdminURL(), s.CACertFile())

	sig := <-sigs
	fmt.Fprintf(os.Stderr, "testcp: %s received, stopping\n", sig)
	if err := s.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "testcp: close: %v\n", err)
	}
	return 0
}
