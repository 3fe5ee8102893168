package agent

import "github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"

// Envoy is how the agent finds, starts and talks to Envoy. Options.Envoy
// nil is the binary --envoy-binary names (supervise.Binary); tests give a
// fake one.
type Envoy = supervise.Envoy

// EnvoyProcess is the running Envoy as the agent supervises it.
type EnvoyProcess = supervise.Process

// EnvoyAdmin is what the agent asks of Envoy's admin API.
type EnvoyAdmin = supervise.Admin

// drainAdmin is the part of the admin API the drains use.
type drainAdmin = supervise.DrainAdmin

// supervised is the Envoy the serve loop runs now.
type supervised = supervise.Serving
