package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/dataplane"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/token"
)

// MaxWorkDirLen keeps "<work-dir>/kuma-envoy-admin" within the 98
// characters the control plane allows for socket paths before it truncates.
const MaxWorkDirLen = 98 - len("/kuma-envoy-admin")

// Problem is one configuration mistake, named by its flag/key, with the fix.
type Problem struct {
	Key     Key // or an environment variable's name
	Message string
	// Transient: a restart may find it fixed without anyone changing the
	// configuration (a token file not written yet, or being rewritten).
	Transient bool
}

// OnlyTransient reports whether err holds problems and all are transient:
// then a restart may succeed, and the exit code must say so (1, not 78).
func OnlyTransient(err error) bool {
	var merr *multierror.Error
	if !errors.As(err, &merr) || len(merr.Errors) == 0 {
		var p Problem
		return errors.As(err, &p) && p.Transient
	}
	for _, e := range merr.Errors {
		var p Problem
		if !errors.As(e, &p) || !p.Transient {
			return false
		}
	}
	return true
}

// Error names the setting. A message made without cutting the values it
// quotes (a value read from the environment or a file can be a whole
// file's worth) is cut here: an over-long value is never echoed whole,
// and a control character in one (a line break) is escaped.
func (p Problem) Error() string {
	if strings.HasPrefix(string(p.Key), EnvPrefix) { // an environment variable, not a flag
		return string(p.Key) + ": " + errtext.OneLine(errtext.Message(p.Message))
	}
	return p.Key.Flag() + ": " + errtext.OneLine(errtext.Message(p.Message))
}

// premade is a message argument already made to be shown: it is not cut.
type premade string

// shown cuts over-long values among a message's arguments (errtext.Values);
// premade ones are kept whole.
func shown(args []any) []any {
	out := errtext.Values(args)
	for i, a := range args {
		if p, ok := a.(premade); ok {
			out[i] = string(p)
		}
	}
	return out
}

// MaxDrainTime is the longest drain Envoy accepts: its --drain-time-s is
// a 32-bit count of seconds (TCLAP::ValueArg<uint32_t> in Envoy's
// source/server/options_impl.cc), and the agent passes the duration
// rounded up to whole seconds (pkg/envoy Args).
const MaxDrainTime = math.MaxUint32 * time.Second

// MaxConcurrency is the most worker threads Envoy's --concurrency, also a
// uint32_t, accepts.
const MaxConcurrency = math.MaxUint32

// Warning is something allowed but worth an operator's attention.
type Warning = Problem

// Validate reports every problem at once. It reads the token and CA files
// (to fail on them now) but never touches the network. now is for token expiry.
func (c *Config) Validate(now time.Time) (warnings []Warning, err error) {
	return c.validate(now, true)
}

// ValidateResource checks only what the rendered resources depend on, for
// commands that print them (no token or CA file needs to exist).
func (c *Config) ValidateResource() error {
	_, err := c.validate(time.Time{}, false)
	return err
}

func (c *Config) validate(now time.Time, files bool) (warnings []Warning, err error) {
	var errs *multierror.Error
	// Every value a message quotes is cut if over-long (errtext.Value).
	add := func(key Key, format string, args ...any) {
		errs = multierror.Append(errs, Problem{Key: key, Message: errtext.OneLine(fmt.Sprintf(format, shown(args)...))})
	}
	warn := func(key Key, format string, args ...any) {
		warnings = append(warnings, Problem{Key: key, Message: errtext.OneLine(fmt.Sprintf(format, shown(args)...))})
	}
	transient := func(key Key, format string, args ...any) {
		errs = multierror.Append(errs, Problem{Key: key, Message: errtext.OneLine(fmt.Sprintf(format, shown(args)...)), Transient: true})
	}

	if c.Mesh == "" {
		add(KeyMesh, "required: the mesh this zone proxy serves, %s", premade(c.meshExample(files)))
	}
	switch c.Role {
	case RoleIngress, RoleEgress, RoleCombined:
	case "":
		add(KeyRole, "required: one of ingress, egress, combined")
	default:
		add(KeyRole, "%q is not a role: use ingress, egress or combined", c.Role)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Labels)) {
		switch {
		case k == "":
			add(KeyLabel, "a label needs a key: use %s key=value", KeyLabel.Flag())
		case k == dataplane.WorkloadLabel:
			add(KeyLabel, "set the %s label with %s instead", dataplane.WorkloadLabel, KeyWorkload.Flag())
		case reservedLabels[k]:
			add(KeyLabel, "%s is set by the control plane: remove it", k)
		case !dataplane.ValidLabelKey(k):
			add(KeyLabel, "%q is not a label key: letters, digits, '-', '_' and '.' (at most 63, starting and ending with a letter or digit), with an optional DNS prefix and '/'", k)
		case !dataplane.ValidLabelValue(c.Labels[k]):
			add(KeyLabel, "%s=%q: a label value is at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", k, c.Labels[k])
		}
	}

	checkPort := func(key Key, p int) {
		if p < 1 || p > 65535 {
			add(key, "%d is not a port: use 1-65535", p)
		}
	}
	checkPort(KeyReadinessPort, c.ReadinessPort)
	checkPort(KeyAdminPort, c.AdminPort)
	ports := map[int]Key{c.ReadinessPort: KeyReadinessPort}
	claim := func(key Key, p int) {
		if other, ok := ports[p]; ok && p != 0 {
			add(key, "port %d is also %s: give each its own port", p, other.Flag())
			return
		}
		ports[p] = key
	}
	claim(KeyAdminPort, c.AdminPort)
	if c.Role.HasIngress() {
		checkPort(KeyIngressPort, c.IngressPort)
		claim(KeyIngressPort, c.IngressPort)
	}
	if c.Role.HasEgress() {
		checkPort(KeyEgressPort, c.EgressPort)
		claim(KeyEgressPort, c.EgressPort)
	}
	if port, ok := checkListenAddress(add, KeyMetricsAddress, c.MetricsAddress, "0.0.0.0:9903", "for /metrics beside /ready on loopback"); ok {
		if _, separate := c.MetricsListener(); separate {
			claim(KeyMetricsAddress, port)
		}
	}
	if port, ok := checkListenAddress(add, KeyHealthAddress, c.HealthAddress, "0.0.0.0:9904", "for /ready on loopback only"); ok {
		claim(KeyHealthAddress, port)
	}

	switch {
	case c.Address == "":
		add(KeyAddress, "no non-loopback IPv4 address found on this host: set %s to the IP zone peers reach this proxy on", KeyAddress.Flag())
	case net.ParseIP(c.Address) == nil:
		add(KeyAddress, "%q is not an IP address: Envoy binds the zone listeners there; give an IP of this host", c.Address)
	}
	if c.Mesh != "" && c.Role != "" && c.Address != "" {
		for _, fe := range c.dataplaneProblems() {
			errs = multierror.Append(errs, fe)
		}
	}

	if files {
		c.validateControlPlane(now, add, warn)
		c.validateToken(now, add, transient, warn)
	}

	if c.EnvoyBinary == "" {
		add(KeyEnvoyBinary, "cannot be empty: the path or name of the Envoy binary")
	}
	if c.WorkDir != "" {
		if !filepath.IsAbs(c.WorkDir) {
			add(KeyWorkDir, "%q must be an absolute path", c.WorkDir)
		} else if len(c.WorkDir) > MaxWorkDirLen {
			add(KeyWorkDir, "%q is %d characters; Envoy's admin socket path must stay short, use at most %d", c.WorkDir, len(c.WorkDir), MaxWorkDirLen)
		}
	}
	switch {
	case c.DrainTime < 0:
		add(KeyDrainTime, "%s is negative: use a duration such as 30s", c.DrainTime)
	case c.DrainTime > MaxDrainTime:
		add(KeyDrainTime, "%s is longer than Envoy accepts: its --drain-time-s is at most %d seconds (%s); use a duration such as 30s", c.DrainTime, uint64(MaxDrainTime/time.Second), MaxDrainTime)
	}
	switch {
	case c.CacheMaxAge < 0:
		add(KeyCacheMaxAge, "%s is negative: use a duration such as 72h (the control plane forgets an offline proxy after 72h)", c.CacheMaxAge)
	case c.CacheMaxAge == 0 && c.StateDir != "":
		add(KeyCacheMaxAge, "0 would never serve the cache it keeps: set %s \"\" to keep none, or a duration such as 72h", KeyStateDir.Flag())
	}
	if c.StateDir != "" && !filepath.IsAbs(c.StateDir) {
		add(KeyStateDir, "%q must be an absolute path (or \"\" to keep no cached configuration)", c.StateDir)
	}
	if c.DrainMin < 0 {
		add(KeyDrainMin, "%s is negative: use a duration such as 5s (it is capped at %s)", c.DrainMin, KeyDrainTime.Flag())
	}
	if !slices.Contains(EnvoyLogLevels, c.EnvoyLogLevel) {
		add(KeyEnvoyLogLevel, "%q is not an Envoy log level: use one of %s", c.EnvoyLogLevel, strings.Join(EnvoyLogLevels, ", "))
	}
	switch {
	case c.Concurrency < 0:
		add(KeyConcurrency, "%d is negative: use 0 for one worker per usable CPU or a number of worker threads", c.Concurrency)
	case uint64(c.Concurrency) > MaxConcurrency:
		add(KeyConcurrency, "%d is more than Envoy's --concurrency accepts (at most %d): use 0 for one worker per usable CPU or a number of worker threads", c.Concurrency, uint64(MaxConcurrency))
	}
	c.validateEnvoyCommandLine(add)
	if c.RetryInitial <= 0 {
		add(KeyRetryInitial, "%s must be positive, e.g. 1s", c.RetryInitial)
	}
	if c.RetryMax < c.RetryInitial {
		add(KeyRetryMax, "%s must be at least %s (%s)", c.RetryMax, KeyRetryInitial.Flag(), c.RetryInitial)
	}
	if c.BootstrapTimeout < 0 {
		add(KeyBootstrapTimeout, "%s is negative: use 0 to wait forever or a duration", c.BootstrapTimeout)
	}
	if !slices.Contains(LogLevels, c.LogLevel) {
		add(KeyLogLevel, "%q is not a log level: use one of %s", c.LogLevel, strings.Join(LogLevels, ", "))
	}
	if !slices.Contains(LogFormats, c.LogFormat) {
		add(KeyLogFormat, "%q is not a log format: use console or json", c.LogFormat)
	}
	return warnings, errs.ErrorOrNil()
}

// checkListenAddress returns the port of a well-formed listener address
// setting key (value "" is none).
func checkListenAddress(add func(key Key, format string, args ...any), key Key, value, example, unsetMeans string) (int, bool) {
	if value == "" {
		return 0, false
	}
	use := "use an IP of this host and a port, e.g. " + example + " for every address (or leave it unset " + unsetMeans + ")"
	host, port, err := net.SplitHostPort(value)
	if err != nil {
		add(key, "%q is not host:port: %s", value, use)
		return 0, false
	}
	ok := true
	if host != "" && net.ParseIP(host) == nil {
		add(key, "%q: %q is not an IP address: %s", value, host, use)
		ok = false
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		add(key, "%q: %q is not a port: use 1-65535", value, port)
		return 0, false
	}
	return p, ok
}

// dataplaneProblems runs the control plane's Dataplane rules and names the
// flag behind each field.
func (c *Config) dataplaneProblems() []Problem {
	dp := c.Dataplane()
	var out []Problem
	for _, fe := range append(dp.ValidateMeta(), dp.Validate()...) {
		// The rules quote the value as it is: cut it if over-long.
		out = append(out, Problem{Key: flagFor(fe.Field, dp), Message: errtext.Message(fe.Message) + " (Dataplane " + fe.Field + ")"})
	}
	return out
}

func flagFor(field string, dp dataplane.Dataplane) Key {
	switch {
	case field == "mesh":
		return KeyMesh
	case field == "name":
		return KeyName
	case strings.HasPrefix(field, "labels"):
		return KeyWorkload
	case field == "networking.address" || strings.HasSuffix(field, ".address"):
		return KeyAddress
	}
	var i int
	if _, err := fmt.Sscanf(field, "networking.listeners[%d]", &i); err == nil && i < len(dp.Networking.Listeners) {
		if dp.Networking.Listeners[i].Type == dataplane.TypeZoneIngress {
			return KeyIngressPort
		}
		return KeyEgressPort
	}
	return KeyConfig
}

func (c *Config) validateControlPlane(now time.Time, add, warn func(key Key, format string, args ...any)) {
	c.validateCPAddress(add)
	if c.CACertFile == "" {
		return
	}
	ca, err := ReadCAFile(c.CACertFile)
	switch {
	case errors.Is(err, token.ErrNotRegular) || errors.Is(err, token.ErrTooLarge):
		add(KeyCACertFile, "%s: %v: give the control plane's CA certificate file (kuma-cp.crt), a regular file", c.CACertFile, errtext.PathCause(err))
		return
	case err != nil:
		add(KeyCACertFile, "cannot read %s: %v", c.CACertFile, errtext.PathCause(err))
		return
	}
	if len(ca.Certs) == 0 {
		add(KeyCACertFile, "%s holds no PEM certificate: give the control plane's CA certificate (kuma-cp.crt)", c.CACertFile)
	}
	if ca.Keys > 0 {
		warn(KeyCACertFile, "%s holds a private key too: zoneproxy sends the control plane only the certificates, but a CA file needs no key; keep it elsewhere", c.CACertFile)
	}
	if te := ca.Time(now); te != nil {
		caTime(c.CACertFile, te, add, warn)
	}
}

// validateCPAddress checks --cp-address without the network.
func (c *Config) validateCPAddress(add func(key Key, format string, args ...any)) {
	u, err := url.Parse(c.CPAddress)
	switch {
	case c.CPAddress == "":
		add(KeyCPAddress, "required: the zone control plane's DP server, e.g. https://cp.zone-1.internal:5678")
	case !strings.Contains(c.CPAddress, "://") && strings.Contains(c.CPAddress, "@"):
		add(KeyCPAddress, "must not hold a user name or password: give only https://host:port (the dataplane token authenticates the proxy)")
	case !strings.Contains(c.CPAddress, "://"):
		// host:port alone: url.Parse fails, or takes the host for a scheme.
		add(KeyCPAddress, "%q has no scheme: did you mean %s? (the DP server speaks only TLS)", c.CPAddress, premade(httpsOf(c.CPAddress)))
	case err != nil:
		add(KeyCPAddress, "%q is not a URL: %v", c.CPAddress, err)
	case u.User != nil: // before any message that quotes the address
		add(KeyCPAddress, "must not hold a user name or password: give only https://host:port (the dataplane token authenticates the proxy)")
	case u.Scheme != "https":
		add(KeyCPAddress, "%q must start with https:// (the control plane's DP server on port 5678 only speaks TLS)", c.CPAddress)
	case u.Hostname() == "":
		add(KeyCPAddress, "%q has no host", c.CPAddress)
	case strings.HasSuffix(u.Host, ":") && u.Port() == "":
		add(KeyCPAddress, "%q has an empty port: give https://host:port, the DP server's port (5678 by default)", c.CPAddress)
	case u.Port() != "" && !validPort(u.Port()):
		add(KeyCPAddress, "%q: %s is not a port: use 1-65535, the DP server's port (5678 by default)", c.CPAddress, u.Port())
	case u.Path != "" && u.Path != "/":
		add(KeyCPAddress, "%q must not have a path: give only https://host:port", c.CPAddress)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(c.CPAddress, "#"):
		// The request would go to / with /bootstrap in the query or
		// fragment: a 404 retried for ever.
		add(KeyCPAddress, "%q must not have a query or fragment: give only https://host:port", c.CPAddress)
	}
	if u != nil && u.Hostname() != "" {
		if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
			add(KeyCPAddress, "%q is a wildcard address: use the control plane's host name or IP", c.CPAddress)
		}
	}
}

// httpsOf is what a cp-address given without a scheme most likely meant:
// https, and the DP server's default port when none is given.
func httpsOf(addr string) string {
	addr = strings.TrimRight(errtext.Value(addr), "/")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(strings.Trim(addr, "[]"), "5678")
	}
	return "https://" + addr
}

// validPort: p is a TCP port a dial can use, 1-65535.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// An empty or missing token file is transient: a provisioner may not
// have written it yet, or be rewriting it; a restart tries again, as the
// running agent does.
func (c *Config) validateToken(now time.Time, add, transient, warn func(key Key, format string, args ...any)) {
	key, where := KeyDataplaneToken, "the token"
	switch {
	case c.DataplaneTokenFile != "" && c.DataplaneToken != "":
		add(KeyDataplaneToken, "set either %s or %s, not both", KeyDataplaneTokenFile.Flag(), KeyDataplaneToken.Flag())
		return
	case c.DataplaneToken != "":
		warn(key, "an inline token leaks easily (process list and shell history for the flag, the environment or config file otherwise); prefer %s", KeyDataplaneTokenFile.Flag())
	case c.DataplaneTokenFile != "":
		key, where = KeyDataplaneTokenFile, "the token in "+c.DataplaneTokenFile
	default:
		warn(KeyDataplaneTokenFile, "no dataplane token given; the control plane will refuse to bootstrap unless its dataplane authentication is off")
		return
	}
	if c.DataplaneTokenFile != "" {
		where = "the token in " + errtext.Value(c.DataplaneTokenFile)
	}
	tok, err := token.Load(c.DataplaneToken, c.DataplaneTokenFile)
	for _, m := range TokenFileExposure(c.DataplaneTokenFile, tok.File) {
		warn(key, "%s", premade(m))
	}
	var notRegular *token.NotRegularError
	switch {
	case errors.Is(err, token.ErrNotJWT):
		add(key, "%s is %v; generate one with `kumactl generate dataplane-token --mesh %s`", premade(where), err, errtext.Arg(c.Mesh))
		return
	case errors.Is(err, token.ErrEmpty):
		transient(key, "%s is empty: write the token from `kumactl generate dataplane-token` into it (exit 1: a restart reads it again)", c.DataplaneTokenFile)
		return
	case errors.As(err, &notRegular):
		// Read once (a pipe), never ending (/dev/zero) or blocking: the
		// agent reads the file again for every connection.
		add(key, "%s is %s, not a regular file: the token file must be a regular file, which the agent reads again at every reconnection; write the token into one (mode 0600) and give its path",
			c.DataplaneTokenFile, token.Kind(notRegular.Mode))
		return
	case errors.Is(err, token.ErrTooLarge):
		add(key, "%s: %v: give the file that holds only the token from `kumactl generate dataplane-token`", c.DataplaneTokenFile, errtext.PathCause(err))
		return
	case errors.Is(err, fs.ErrNotExist) && !token.LooksLikeJWT(filepath.Base(c.DataplaneTokenFile)):
		transient(key, "%s does not exist: write the token from `kumactl generate dataplane-token` there, or fix the path (exit 1: a restart looks again)", c.DataplaneTokenFile)
		return
	case err != nil && token.LooksLikeJWT(filepath.Base(c.DataplaneTokenFile)):
		// The token itself given as the path: never echoed.
		add(key, "the value is a token, not a path: write the token into a file (mode 0600) and give its path")
		return
	case err != nil:
		add(key, "cannot read %s: %v", c.DataplaneTokenFile, errtext.PathCause(err))
		return
	}
	if err := c.checkClaims(tok.Claims); err != nil {
		add(key, "%s cannot be used: %v", premade(where), err)
	}
	if te := tok.Claims.CheckTime(now); te != nil {
		tokenTime(key, where, te, add, warn)
	}
}

// reservedLabels are the control plane's own: it overwrites or checks them.
var reservedLabels = map[string]bool{
	"kuma.io/mesh": true, "kuma.io/zone": true, "kuma.io/origin": true, "kuma.io/env": true,
	"kuma.io/display-name": true, "kuma.io/proxy-type": true,
}

// checkClaims compares the token's bindings with this proxy. Without a
// --mesh there is nothing to compare (--mesh has its own problem, which
// names the token's mesh); a name or workload made from a mistyped --role
// is not the operator's, so the token is not blamed for it.
func (c *Config) checkClaims(claims token.Claims) error {
	if c.Mesh == "" {
		return nil
	}
	name, workload := c.Name, c.Workload
	if !c.Role.Known() {
		if c.derivedName {
			name = claims.Name
		}
		if c.derivedWorkload {
			workload = claims.Workload
		}
	}
	return claims.Check(c.Mesh, name, workload, c.Dataplane().Labels, func(k string) bool { return reservedLabels[k] })
}

// meshExample ends the missing --mesh's message: the token's mesh when
// the token names one, else an example.
func (c *Config) meshExample(files bool) string {
	if files {
		if tok, err := token.Load(c.DataplaneToken, c.DataplaneTokenFile); err == nil && tok.Claims.Mesh != "" {
			return fmt.Sprintf("the dataplane token is for mesh %q: %s %s", errtext.Value(tok.Claims.Mesh), KeyMesh.Flag(), errtext.Arg(tok.Claims.Mesh))
		}
	}
	return "e.g. " + KeyMesh.Flag() + " payments"
}
