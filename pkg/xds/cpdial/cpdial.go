// Package cpdial describes how the relay dials the control plane: read
// from the control plane's bootstrap (bootstraprewrite), kept with the
// last-known-good configuration (lkgcache) and dialled by the relay. It is
// a plain description shared by all three and imports none of them.
package cpdial

// Target is how the control plane's bootstrap told Envoy to reach it. The
// field names are the cache file's JSON keys: renaming one forgets it in
// caches already written.
type Target struct {
	Address    string // host:port of the control plane's xDS server
	ServerName string // SNI, and the exact DNS or IP SAN its certificate must carry
	CAPEM      []byte // the CA the bootstrap trusts for the control plane
	// Metadata is the gRPC metadata the control plane asked for besides
	// the token, in order.
	Metadata []Header
	// HadToken says the ADS service carried an authorization header.
	HadToken bool
	// TokenPath is the token file Envoy was told to read (google_grpc with
	// reloadable tokens), else "".
	TokenPath string
	// GoogleGRPC says ADS came as google_grpc (reloadable tokens).
	GoogleGRPC bool
	// MaxReceiveMessageLength is the limit the control plane set on its
	// messages to Envoy; 0 means none.
	MaxReceiveMessageLength int
	// HDS says hds_config talks to the control plane, so through the relay.
	HDS bool
}

// Header is one gRPC metadata entry.
type Header struct{ Key, Value string }
