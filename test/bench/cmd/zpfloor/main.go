// Command zpfloor is the least a zone proxy's start can do: one TLS dial
// to the control plane, one POST /bootstrap of a request made earlier, the
// bootstrap written to a file, and Envoy exec'd on it. No configuration,
// validation, work dir, readiness endpoint, relay or supervision; only the
// Go runtime and the standard library.
//
// zpbench runs it between the agent's starts, against the same control
// plane and the same Envoy wrapper, so that the start-up figure can be
// read beside the floor the machine allows at that moment.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
)

func main() {
	cpAddress := flag.String("cp-address", "", "the control plane's DP server, https://host:port")
	caFile := flag.String("ca-cert-file", "", "PEM CA the control plane's certificate must chain to")
	requestFile := flag.String("request-file", "", "a bootstrap request body, JSON")
	envoyBinary := flag.String("envoy-binary", "", "what to exec with --config-path")
	workDir := flag.String("work-dir", "", "where bootstrap.yaml is written (made if missing)")
	flag.Parse()
	if err := run(*cpAddress, *caFile, *requestFile, *envoyBinary, *workDir); err != nil {
		fmt.Fprintln(os.Stderr, "zpfloor:", err)
		os.Exit(1)
	}
}

func run(cpAddress, caFile, requestFile, envoyBinary, workDir string) error {
	u, err := url.Parse(cpAddress)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("-cp-address %q: want https://host:port", cpAddress)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return fmt.Errorf("%s: no PEM certificate", caFile)
	}
	body, err := os.ReadFile(requestFile)
	if err != nil {
		return err
	}
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: roots, ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}})
	if err != nil {
		return err
	}
	defer conn.Close()
	req, err := http.NewRequest(http.MethodPost, cpAddress+"/bootstrap", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json") // else kuma-cp answers the bare YAML
	req.Header.Set("Content-Type", "application/json")
	if err := req.Write(conn); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the control plane answered %s", resp.Status)
	}
	var answer struct {
		Bootstrap string `json:"bootstrap"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return err
	}
	doc, err := base64.StdEncoding.DecodeString(answer.Bootstrap)
	if err != nil || len(doc) == 0 {
		return errors.Join(errors.New("no bootstrap in the answer"), err)
	}
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(workDir, "bootstrap.yaml")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		return err
	}
	cmd := exec.Command(envoyBinary, "--config-path", path)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}
