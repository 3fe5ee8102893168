package main

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigDumpRedactsSecretsLikeEnvoy(t *testing.T) {
	p := newPKI(t, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	keyDER, err := x509.MarshalPKCS8PrivateKey(p.serverCert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.serverCert.Certificate[0]})
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "admin.sock")
	boot := fmt.Sprintf(`{
  "node": {"id": "n", "cluster": "c"},
  "admin": {"address": {"pipe": {"path": %q, "mode": 384}}},
  "static_resources": {"secrets": [{"name": "server_cert", "tls_certificate": {
    "certificate_chain": {"inline_bytes": %q},
    "private_key": {"inline_bytes": %q}}}]}
}`, sock, base64.StdEncoding.EncodeToString(certPEM), base64.StdEncoding.EncodeToString(keyPEM))
	path := filepath.Join(dir, "bootstrap.json")
	if err := os.WriteFile(path, []byte(boot), 0o600); err != nil {
		t.Fatal(err)
	}
	startEnvoy(t, nil, "-c", path, "--disable-hot-restart")
	waitFor(t, 5*time.Second, "admin", func() bool { _, _, err := adminTry(sock, "GET", "/ready"); return err == nil })
	// No dynamic resources: the server is LIVE right away.
	if code, body := adminDo(t, sock, "GET", "/ready"); code != 200 || body != "LIVE\n" {
		t.Fatalf("/ready = %d %q", code, body)
	}
	_, dump := adminDo(t, sock, "GET", "/config_dump")
	keyB64 := base64.StdEncoding.EncodeToString(keyPEM)
	if strings.Contains(dump, keyB64) || strings.Contains(dump, string(keyPEM)) {
		t.Fatal("private key served by /config_dump")
	}
	if !strings.Contains(dump, base64.StdEncoding.EncodeToString([]byte("[redacted]"))) {
		t.Fatalf("no redaction marker in %s", dump)
	}
	// The certificate chain is not sensitive and stays.
	if !strings.Contains(dump, base64.StdEncoding.EncodeToString(certPEM)) {
		t.Fatal("certificate chain missing from the dump")
	}
}

func TestStaticSecretFileMustExist(t *testing.T) {
	dir := shortTempDir(t)
	path := filepath.Join(dir, "b.yaml")
	os.WriteFile(path, []byte(`
node: {id: node1, cluster: c1}
staticResources:
  secrets:
  - name: ca
    validationContext:
      trustedCa: {filename: `+dir+`/nope.pem}
`), 0o600)
	_, errOut, code := runEnvoy(t, nil, "--mode", "validate", "-c", path)
	if code != 1 || !strings.Contains(errOut, "unable to read file: "+dir+"/nope.pem") {
		t.Fatalf("code %d %q", code, errOut)
	}
}
