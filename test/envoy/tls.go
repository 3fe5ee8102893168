package main

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
)

// secretLookup finds SDS secrets: static ones from the bootstrap and dynamic
// ones received over ADS. ok is false while a dynamic secret has not arrived.
type secretLookup func(cfg *tlsv3.SdsSecretConfig) (secret *tlsv3.Secret, ok bool)

// errWaitingForSecret means Envoy would keep the cluster initializing.
type errWaitingForSecret struct{ name string }

func (e *errWaitingForSecret) Error() string {
	return fmt.Sprintf("waiting for SDS secret '%s'", e.name)
}

func readDataSource(ds *corev3.DataSource) ([]byte, string, error) {
	switch s := ds.GetSpecifier().(type) {
	case *corev3.DataSource_InlineBytes:
		return s.InlineBytes, "<inline>", nil
	case *corev3.DataSource_InlineString:
		return []byte(s.InlineString), "<inline>", nil
	case *corev3.DataSource_Filename:
		b, err := os.ReadFile(s.Filename)
		if err != nil {
			return nil, s.Filename, fmt.Errorf("unable to read file: %s", s.Filename)
		}
		return b, s.Filename, nil
	case *corev3.DataSource_EnvironmentVariable:
		v, ok := os.LookupEnv(s.EnvironmentVariable)
		if !ok {
			return nil, "", fmt.Errorf("Environment variable doesn't exist: %s", s.EnvironmentVariable)
		}
		return []byte(v), "<inline>", nil
	}
	return nil, "", nil
}

var defaultClientCiphers = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// OpenSSL names BoringSSL accepts in tls_params.cipher_suites.
var cipherByName = map[string]uint16{
	"ECDHE-ECDSA-AES128-GCM-SHA256": tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-RSA-AES128-GCM-SHA256":   tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-ECDSA-AES256-GCM-SHA384": tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-RSA-AES256-GCM-SHA384":   tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-ECDSA-CHACHA20-POLY1305": tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-RSA-CHACHA20-POLY1305":   tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-ECDSA-AES128-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA,
	"ECDHE-RSA-AES128-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
	"ECDHE-ECDSA-AES256-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
	"ECDHE-RSA-AES256-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
	"AES128-GCM-SHA256":             tls.TLS_RSA_WITH_AES_128_GCM_SHA256,
	"AES256-GCM-SHA384":             tls.TLS_RSA_WITH_AES_256_GCM_SHA384,
	"AES128-SHA":                    tls.TLS_RSA_WITH_AES_128_CBC_SHA,
	"AES256-SHA":                    tls.TLS_RSA_WITH_AES_256_CBC_SHA,
}

var tlsVersions = map[tlsv3.TlsParameters_TlsProtocol]uint16{
	tlsv3.TlsParameters_TLSv1_0: tls.VersionTLS10,
	tlsv3.TlsParameters_TLSv1_1: tls.VersionTLS11,
	tlsv3.TlsParameters_TLSv1_2: tls.VersionTLS12,
	tlsv3.TlsParameters_TLSv1_3: tls.VersionTLS13,
}

// upstreamTLSConfig builds the client side of an UpstreamTlsContext the way
// Envoy's ClientContextImpl behaves: SNI only when configured, chain checked
// against trusted_ca only, SAN matchers checked by hand (never hostname).
func upstreamTLSConfig(utc *tlsv3.UpstreamTlsContext, lookup secretLookup) (*tls.Config, error) {
	common := utc.GetCommonTlsContext()
	// Envoy's client defaults: TLS 1.2 only, its ECDHE AEAD cipher list,
	// X25519 and P-256.
	cfg := &tls.Config{
		InsecureSkipVerify: true,
		ServerName:         utc.GetSni(),
		MinVersion:         tls.VersionTLS12,
		MaxVersion:         tls.VersionTLS12,
		NextProtos:         common.GetAlpnProtocols(),
		CipherSuites:       defaultClientCiphers,
		CurvePreferences:   []tls.CurveID{tls.X25519, tls.CurveP256},
	}
	if p := common.GetTlsParams(); p != nil {
		if v, ok := tlsVersions[p.GetTlsMinimumProtocolVersion()]; ok {
			cfg.MinVersion = v
		}
		if v, ok := tlsVersions[p.GetTlsMaximumProtocolVersion()]; ok {
			cfg.MaxVersion = v
		}
		if len(p.GetCipherSuites()) > 0 {
			var ids []uint16
			for _, n := range p.GetCipherSuites() {
				for _, alt := range strings.Split(strings.Trim(n, "[]"), "|") {
					if id, ok := cipherByName[alt]; ok {
						ids = append(ids, id)
					}
				}
			}
			if len(ids) == 0 {
				return nil, fmt.Errorf("Failed to initialize cipher suites %s", strings.Join(p.GetCipherSuites(), ":"))
			}
			cfg.CipherSuites = ids
		}
	}
	if cfg.MinVersion > cfg.MaxVersion {
		cfg.MaxVersion = cfg.MinVersion
	}
	var certs []*tlsv3.TlsCertificate
	certs = append(certs, common.GetTlsCertificates()...)
	for _, sc := range common.GetTlsCertificateSdsSecretConfigs() {
		s, ok := lookup(sc)
		if !ok {
			return nil, &errWaitingForSecret{sc.GetName()}
		}
		if s == nil || s.GetTlsCertificate() == nil {
			return nil, fmt.Errorf("Unknown static secret: %s", sc.GetName())
		}
		certs = append(certs, s.GetTlsCertificate())
	}
	for _, c := range certs {
		kp, err := loadKeyPair(c)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = append(cfg.Certificates, kp)
	}

	var vc *tlsv3.CertificateValidationContext
	var sdsCfg *tlsv3.SdsSecretConfig
	switch v := common.GetValidationContextType().(type) {
	case *tlsv3.CommonTlsContext_ValidationContext:
		vc = v.ValidationContext
	case *tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig:
		sdsCfg = v.ValidationContextSdsSecretConfig
	case *tlsv3.CommonTlsContext_CombinedValidationContext:
		vc = v.CombinedValidationContext.GetDefaultValidationContext()
		sdsCfg = v.CombinedValidationContext.GetValidationContextSdsSecretConfig()
	}
	if sdsCfg != nil {
		s, ok := lookup(sdsCfg)
		if !ok {
			return nil, &errWaitingForSecret{sdsCfg.GetName()}
		}
		if s == nil || s.GetValidationContext() == nil {
			return nil, fmt.Errorf("Unknown static certificate validation context: %s", sdsCfg.GetName())
		}
		merged := s.GetValidationContext()
		if vc != nil {
			// The dynamic context is merged over the default one.
			m := cloneVC(vc)
			mergeVC(m, merged)
			merged = m
		}
		vc = merged
	}
	if vc == nil {
		return cfg, nil
	}
	verify, err := peerVerifier(vc)
	if err != nil {
		return nil, err
	}
	cfg.VerifyPeerCertificate = verify
	return cfg, nil
}

func loadKeyPair(c *tlsv3.TlsCertificate) (tls.Certificate, error) {
	chain, chainName, err := readDataSource(c.GetCertificateChain())
	if err != nil {
		return tls.Certificate{}, err
	}
	key, keyName, err := readDataSource(c.GetPrivateKey())
	if err != nil {
		return tls.Certificate{}, err
	}
	if _, err := x509ChainFromPEM(chain); err != nil {
		return tls.Certificate{}, fmt.Errorf("Failed to load certificate chain from %s", chainName)
	}
	kp, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("Failed to load private key from %s", keyName)
	}
	return kp, nil
}

func x509ChainFromPEM(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := b
	for {
		cert, r, ok := nextPEMCert(rest)
		if !ok {
			break
		}
		rest = r
		out = append(out, cert)
	}
	if len(out) == 0 {
		return nil, errors.New("no certificates")
	}
	return out, nil
}

func cloneVC(vc *tlsv3.CertificateValidationContext) *tlsv3.CertificateValidationContext {
	return proto.Clone(vc).(*tlsv3.CertificateValidationContext)
}

func nextPEMCert(b []byte) (*x509.Certificate, []byte, bool) {
	for {
		block, rest := pem.Decode(b)
		if block == nil {
			return nil, nil, false
		}
		b = rest
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, nil, false
		}
		return c, rest, true
	}
}

func mergeVC(dst, src *tlsv3.CertificateValidationContext) {
	if src.GetTrustedCa() != nil {
		dst.TrustedCa = src.GetTrustedCa()
	}
	dst.MatchTypedSubjectAltNames = append(dst.MatchTypedSubjectAltNames, src.GetMatchTypedSubjectAltNames()...)
	dst.MatchSubjectAltNames = append(dst.MatchSubjectAltNames, src.GetMatchSubjectAltNames()...)
	dst.VerifyCertificateHash = append(dst.VerifyCertificateHash, src.GetVerifyCertificateHash()...)
	dst.VerifyCertificateSpki = append(dst.VerifyCertificateSpki, src.GetVerifyCertificateSpki()...)
	if src.GetAllowExpiredCertificate() {
		dst.AllowExpiredCertificate = true
	}
	if src.GetTrustChainVerification() != 0 {
		dst.TrustChainVerification = src.GetTrustChainVerification()
	}
}

type certVerifyError struct{ reason string }

func (e *certVerifyError) Error() string {
	return "TLS_error:|268435581:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED:" + e.reason + ":TLS_error_end"
}

// peerVerifier checks the server chain against trusted_ca and then the SAN,
// hash and SPKI pins, like DefaultCertValidator.
func peerVerifier(vc *tlsv3.CertificateValidationContext) (func([][]byte, [][]*x509.Certificate) error, error) {
	var roots *x509.CertPool
	if vc.GetTrustedCa() != nil {
		pem, name, err := readDataSource(vc.GetTrustedCa())
		if err != nil {
			return nil, err
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("Failed to load trusted CA certificates from %s", name)
		}
	} else if vc.GetSystemRootCerts() != nil {
		sys, err := x509.SystemCertPool()
		if err != nil {
			return nil, err
		}
		roots = sys
	}
	sans, err := sanMatchers(vc)
	if err != nil {
		return nil, err
	}
	if roots == nil && len(sans) > 0 {
		return nil, errors.New("SAN-based verification of peer certificates without trusted CA is insecure and not allowed")
	}
	hashes := map[string]bool{}
	for _, h := range vc.GetVerifyCertificateHash() {
		hashes[strings.ToLower(strings.ReplaceAll(h, ":", ""))] = true
	}
	spkis := map[string]bool{}
	for _, s := range vc.GetVerifyCertificateSpki() {
		spkis[s] = true
	}
	acceptUntrusted := vc.GetTrustChainVerification() == tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED
	allowExpired := vc.GetAllowExpiredCertificate()

	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return &certVerifyError{"no peer certificate"}
		}
		chain := make([]*x509.Certificate, 0, len(raw))
		for _, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return &certVerifyError{err.Error()}
			}
			chain = append(chain, c)
		}
		leaf := chain[0]
		if roots != nil && !acceptUntrusted {
			inter := x509.NewCertPool()
			for _, c := range chain[1:] {
				inter.AddCert(c)
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			if allowExpired {
				opts.CurrentTime = leaf.NotBefore
			}
			if _, err := leaf.Verify(opts); err != nil {
				return &certVerifyError{err.Error()}
			}
		}
		if len(sans) > 0 && !matchAnySAN(leaf, sans) {
			return &certVerifyError{"SAN mismatch: no subject alternative name matched the configured matchers"}
		}
		if len(hashes) > 0 || len(spkis) > 0 {
			sum := sha256.Sum256(leaf.Raw)
			spki := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
			if !hashes[hex.EncodeToString(sum[:])] && !spkis[base64.StdEncoding.EncodeToString(spki[:])] {
				return &certVerifyError{"certificate hash/SPKI pin mismatch"}
			}
		}
		return nil
	}, nil
}

type sanMatcher struct {
	typ tlsv3.SubjectAltNameMatcher_SanType // SAN_TYPE_UNSPECIFIED means any type
	m   *stringMatcher
}

func sanMatchers(vc *tlsv3.CertificateValidationContext) ([]sanMatcher, error) {
	var out []sanMatcher
	for _, t := range vc.GetMatchTypedSubjectAltNames() {
		sm, err := newStringMatcher(t.GetMatcher())
		if err != nil {
			return nil, err
		}
		out = append(out, sanMatcher{t.GetSanType(), sm})
	}
	for _, m := range vc.GetMatchSubjectAltNames() {
		sm, err := newStringMatcher(m)
		if err != nil {
			return nil, err
		}
		out = append(out, sanMatcher{tlsv3.SubjectAltNameMatcher_SAN_TYPE_UNSPECIFIED, sm})
	}
	return out, nil
}

func matchAnySAN(leaf *x509.Certificate, sans []sanMatcher) bool {
	for _, s := range sans {
		any := s.typ == tlsv3.SubjectAltNameMatcher_SAN_TYPE_UNSPECIFIED
		if any || s.typ == tlsv3.SubjectAltNameMatcher_DNS {
			for _, d := range leaf.DNSNames {
				if s.m.matchDNS(d) {
					return true
				}
			}
		}
		if any || s.typ == tlsv3.SubjectAltNameMatcher_IP_ADDRESS {
			for _, ip := range leaf.IPAddresses {
				if s.m.match(ip.String()) {
					return true
				}
			}
		}
		if any || s.typ == tlsv3.SubjectAltNameMatcher_URI {
			for _, u := range leaf.URIs {
				if s.m.match(u.String()) {
					return true
				}
			}
		}
		if any || s.typ == tlsv3.SubjectAltNameMatcher_EMAIL {
			for _, e := range leaf.EmailAddresses {
				if s.m.match(e) {
					return true
				}
			}
		}
	}
	return false
}

type stringMatcher struct {
	pb *matcherv3.StringMatcher
	re *regexp.Regexp
}

func newStringMatcher(m *matcherv3.StringMatcher) (*stringMatcher, error) {
	sm := &stringMatcher{pb: m}
	if r := m.GetSafeRegex(); r != nil {
		re, err := regexp.Compile("^(?:" + r.GetRegex() + ")$")
		if err != nil {
			return nil, fmt.Errorf("Invalid regex '%s': %s", r.GetRegex(), err)
		}
		sm.re = re
	}
	return sm, nil
}

func (s *stringMatcher) match(v string) bool {
	m := s.pb
	ic := m.GetIgnoreCase()
	norm := func(x string) string {
		if ic {
			return strings.ToLower(x)
		}
		return x
	}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return norm(v) == norm(p.Exact)
	case *matcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(norm(v), norm(p.Prefix))
	case *matcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(norm(v), norm(p.Suffix))
	case *matcherv3.StringMatcher_Contains:
		return strings.Contains(norm(v), norm(p.Contains))
	case *matcherv3.StringMatcher_SafeRegex:
		return s.re != nil && s.re.MatchString(v)
	}
	return false
}

// matchDNS applies Envoy's dnsNameMatch for exact matchers: a "*.example.com"
// SAN matches one extra left-most label.
func (s *stringMatcher) matchDNS(san string) bool {
	if s.match(san) {
		return true
	}
	exact, ok := s.pb.GetMatchPattern().(*matcherv3.StringMatcher_Exact)
	if !ok || !strings.HasPrefix(san, "*.") {
		return false
	}
	want := strings.ToLower(exact.Exact)
	dot := strings.Index(want, ".")
	return dot > 0 && want[dot:] == strings.ToLower(san[1:])
}
