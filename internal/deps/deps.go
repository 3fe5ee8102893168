//go:build deps

// Package deps pins modules while the packages that use them are written.
package deps

import (
	_ "github.com/coreos/go-systemd/v22/daemon"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	_ "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	_ "github.com/golang-jwt/jwt/v5"
	_ "github.com/hashicorp/go-multierror"
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/viper"
	_ "go.uber.org/zap"
	_ "google.golang.org/grpc"
	_ "sigs.k8s.io/yaml"
)
