package lkgcache

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
)

var testID = Identity{Mesh: "default", Name: "zp-1", Role: "ingress", ControlPlane: "https://cp:5678"}

// tlsSecret is an SDS secret as the control plane sends it.
func tlsSecret(t testing.TB, name string, chain []byte) Resource {
	t.Helper()
	body, err := proto.Marshal(&tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: chain}},
		PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte("key")}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return Resource{Name: name, Version: "1", TypeURL: SecretType, Body: body}
}

func trustBundle(t testing.TB, name string) Resource {
	t.Helper()
	body, err := proto.Marshal(&tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
		TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte("ca")}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return Resource{Name: name, Version: "1", TypeURL: SecretType, Body: body}
}

// trustBundlePEM is a validation-context secret holding CA certificates.
func trustBundlePEM(t testing.TB, name string, cas ...[]byte) Resource {
	t.Helper()
	var bundle []byte
	for _, ca := range cas {
		bundle = append(bundle, ca...)
	}
	body, err := proto.Marshal(&tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
		TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: bundle}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return Resource{Name: name, Version: "1", TypeURL: SecretType, Body: body}
}

const listenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"

func listenerTypes() []TypeState {
	return []TypeState{{TypeURL: listenerType, Version: "v7", Resources: []Resource{
		{Name: "zone-ingress", Version: "3", TypeURL: listenerType, Body: []byte{0x0a, 0x01, 'l'}},
		{Name: "admin", Version: "1", TypeURL: listenerType, Body: []byte{}},
	}}}
}
