package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

const (
	caCertFileName     = "ca.pem"
	serverCertFileName = "server.pem"
	serverKeyFileName  = "server-key.pem"
)

// certs is the DP server's TLS material: a CA and a leaf it signed.
type certs struct {
	caPEM   []byte
	caCert  *x509.Certificate
	leaf    *x509.Certificate
	tlsCert tls.Certificate
}

var serverDNSNames = []string{"localhost"}
var serverIPs = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}

// loadOrCreateCerts reuses the PEM files in dir when they are valid and
// the server's key is of the kind asked for, like kuma-cp reuses its
// generated pair in its work dir, else writes new ones. rsaKey makes the
// server's key RSA 2048, the key kuma-cp generates for itself.
func loadOrCreateCerts(dir string, rsaKey bool) (*certs, error) {
	if c, err := loadCerts(dir); err == nil {
		if _, isRSA := c.leaf.PublicKey.(*rsa.PublicKey); isRSA == rsaKey {
			return c, nil
		}
	}
	return createCerts(dir, rsaKey)
}

func loadCerts(dir string) (*certs, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, caCertFileName))
	if err != nil {
		return nil, err
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, serverCertFileName))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, serverKeyFileName))
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(caPEM)
	if block == nil {
		return nil, errors.New("no PEM in ca.pem")
	}
	caCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, err
	}
	tlsCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(tlsCert.Certificate[0])
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost", CurrentTime: time.Now().Add(time.Hour)}); err != nil {
		return nil, err
	}
	for _, ip := range serverIPs {
		if err := leaf.VerifyHostname(ip.String()); err != nil {
			return nil, err
		}
	}
	tlsCert.Leaf = leaf
	return &certs{caPEM: caPEM, caCert: caCert, leaf: leaf, tlsCert: tlsCert}, nil
}

func createCerts(dir string, rsaKey bool) (*certs, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now().Add(-time.Minute)
	caTmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "zoneproxy test control plane CA"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	var key crypto.Signer
	if rsaKey {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		return nil, err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "localhost"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  false,
		DNSNames:              serverDNSNames,
		IPAddresses:           serverIPs,
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, key.Public(), caKey)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(leafDER)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}

	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{caCertFileName, caPEM, 0o644},
		{serverCertFileName, certPEM, 0o644},
		{serverKeyFileName, keyPEM, 0o600},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return nil, err
		}
		// WriteFile keeps the mode of an existing file.
		if err := os.Chmod(p, f.mode); err != nil {
			return nil, err
		}
	}
	tlsCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	tlsCert.Leaf = leaf
	return &certs{caPEM: caPEM, caCert: caCert, leaf: leaf, tlsCert: tlsCert}, nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return n
}

// sanList formats the leaf's SANs like kuma-cp does in its SAN mismatch
// error: IPs first, then DNS names, as a Go %q slice.
func (c *certs) sanList() string {
	var sans []string
	for _, ip := range c.leaf.IPAddresses {
		sans = append(sans, ip.String())
	}
	sans = append(sans, c.leaf.DNSNames...)
	return fmt.Sprintf("%q", sans)
}
