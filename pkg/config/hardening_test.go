package config

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/zoneproxy/zoneproxy/internal/testutil"
	"github.com/zoneproxy/zoneproxy/pkg/host/timesync"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/token"
)

// problems runs Validate at now with the clock synchronised (unless
// clock is given) and returns the errors and warnings as text.
func problems(t *testing.T, c Config, now time.Time, clock ...timesync.Status) (errs []Problem, warns []Warning, err error) {
	t.Helper()
	st := timesync.Status{Synced: true}
	if len(clock) > 0 {
		st = clock[0]
	}
	clockStatus = func() timesync.Status { return st }
	t.Cleanup(func() { clockStatus = timesync.Check })
	done := make(chan struct{})
	go func() {
		defer close(done)
		warns, err = c.Validate(now)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Validate blocks")
	}
	var merr *multierror.Error
	if errors.As(err, &merr) {
		for _, e := range merr.Errors {
			var p Problem
			if errors.As(e, &p) {
				errs = append(errs, p)
			}
		}
	}
	return errs, warns, err
}

// A token file that is no regular file (a named pipe, a process
// substitution, /dev/zero, a directory) or is larger than a token can be
// is a configuration error (exit 78), said at once and without reading it:
// no restart makes it a token file.
func TestTokenFileMustBeARegularFileOfATokensSize(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", token.MaxFileSize+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path string
		says       []string
	}{
		{"named pipe", fifo, []string{fifo + " is a named pipe (FIFO), not a regular file: the token file must be a regular file", "write the token into one (mode 0600) and give its path"}},
		{"/dev/zero", "/dev/zero", []string{"/dev/zero is a character device, not a regular file"}},
		{"a link to /dev/zero", zero, []string{zero + " is a character device, not a regular file"}},
		{"directory", dir, []string{dir + " is a directory, not a regular file"}},
		{"larger than a token", big, []string{big + ": it holds 65537 bytes or more, more than the 64 KiB a token file may hold", "give the file that holds only the token"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			c.DataplaneTokenFile = tc.path
			errs, _, err := problems(t, c, time.Now())
			if len(errs) != 1 || errs[0].Key != "dataplane-token-file" || errs[0].Transient || OnlyTransient(err) {
				t.Fatalf("want one configuration error for --dataplane-token-file, got %v", err)
			}
			for _, w := range tc.says {
				if !strings.Contains(errs[0].Error(), w) {
					t.Errorf("%q does not say %q", errs[0].Error(), w)
				}
			}
		})
	}
}

// --cp-address with a port no dial can use is a configuration error: it
// was retried for ever.
func TestCPAddressPort(t *testing.T) {
	cases := []struct {
		addr, err string
	}{
		{"https://cp.zone-1.internal:5678", ""},
		{"https://cp.zone-1.internal", ""},
		{"https://[fd00::1]:5678", ""},
		{"https://cp:65535", ""},
		{"https://cp:99999", `--cp-address: "https://cp:99999": 99999 is not a port: use 1-65535`},
		{"https://cp:0", `--cp-address: "https://cp:0": 0 is not a port: use 1-65535`},
		{"https://[fd00::1]:0", `0 is not a port`},
		{"https://cp:", `--cp-address: "https://cp:" has an empty port: give https://host:port`},
	}
	for _, tc := range cases {
		t.Run(tc.addr, func(t *testing.T) {
			c := valid()
			c.CPAddress = tc.addr
			errs, _, err := problems(t, c, time.Now())
			if tc.err == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.err) || OnlyTransient(err) {
				t.Fatalf("got %v, want %q", err, tc.err)
			}
		})
	}
}

// --drain-time and --concurrency within what Envoy's command line takes
// (both are uint32_t there); beyond, Envoy refuses to start at every
// restart, so it is a configuration error.
func TestEnvoyNumbersWithinEnvoysLimits(t *testing.T) {
	cases := []struct {
		name        string
		drain       time.Duration
		concurrency int
		err         string
	}{
		{"defaults", DefaultDrainTime, 0, ""},
		{"the longest drain Envoy takes", 4294967295 * time.Second, 0, ""},
		{"a second more", 4294967296 * time.Second, 0, "--drain-time: 1193046h28m16s is longer than Envoy accepts: its --drain-time-s is at most 4294967295 seconds (1193046h28m15s); use a duration such as 30s"},
		{"a fraction more (rounded up)", 4294967295*time.Second + time.Millisecond, 0, "--drain-time: 1193046h28m15.001s is longer than Envoy accepts"},
		{"2000000h", 2000000 * time.Hour, 0, "--drain-time: 2000000h0m0s is longer than Envoy accepts"},
		{"the most workers Envoy takes", DefaultDrainTime, 4294967295, ""},
		{"more workers", DefaultDrainTime, 4294967296, "--concurrency: 4294967296 is more than Envoy's --concurrency accepts (at most 4294967295)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			c.DrainTime, c.Concurrency = tc.drain, tc.concurrency
			err := c.ValidateResource()
			if tc.err == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || OnlyTransient(err) {
				t.Fatalf("got %v, want %q", err, tc.err)
			}
		})
	}
}

// A value read from a file or the environment can be a whole file's
// worth: no problem shows one whole.
func TestOverLongValuesAreCut(t *testing.T) {
	long := strings.Repeat("a", 1<<20)
	c := valid()
	c.Role = Role(long)
	c.CPAddress = "https://" + long + ":5678"
	c.WorkDir = "/" + long
	c.StateDir, c.CacheMaxAge = long, time.Hour
	c.EnvoyLogLevel, c.LogLevel, c.LogFormat = long, long, long
	c.EnvoyComponentLogLevel = long
	c.EnvoyArgs = []string{"--concurrency " + long}
	c.MetricsAddress = long
	c.Address = long
	c.Labels = map[string]string{"team": long, long: "x"}
	errs, _, err := problems(t, c, time.Now())
	if len(errs) < 12 {
		t.Fatalf("%d problems: %.3000v", len(errs), err)
	}
	for _, p := range errs {
		// The message itself is cut where it is made (warnings are
		// logged from it), not only when shown.
		if msg := p.Message; len(msg) > 1000 || !strings.Contains(msg, "…(") {
			t.Errorf("--%s: %d bytes: %.400q", p.Key, len(msg), msg)
		}
	}
	// The Dataplane's own rules quote the name as it is.
	c = valid()
	c.Name = strings.Repeat("a b", 1<<18)
	errs, _, _ = problems(t, c, time.Now())
	if len(errs) == 0 {
		t.Fatal("a name with spaces passed")
	}
	for _, p := range errs {
		if msg := p.Message; len(msg) > 2300 {
			t.Errorf("--%s: %d bytes: %.400q", p.Key, len(msg), msg)
		}
	}
}

// A problem made elsewhere (the flag and file decoding of pkg/cli) that
// quotes an over-long value is cut when shown.
func TestProblemTextIsCutWhenShown(t *testing.T) {
	long := strings.Repeat("7", 100<<20)
	cases := []struct {
		name string
		p    Problem
		want string
	}{
		{"flag", Problem{Key: "ingress-port", Message: long + " is not a whole number"},
			"--ingress-port: " + strings.Repeat("7", 200) + "…(104857600 bytes) is not a whole number"},
		{"variable", Problem{Key: "ZONEPROXY_DRAIN_TIME", Message: `"` + long + `" is not a duration: write e.g. 30s`},
			`ZONEPROXY_DRAIN_TIME: "` + strings.Repeat("7", 199) + "…(104857602 bytes) is not a duration: write e.g. 30s"},
		{"short", Problem{Key: "mesh", Message: "required"}, "--mesh: required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Error(); got != tc.want {
				t.Errorf("got %.400q, want %.400q", got, tc.want)
			}
		})
	}
}

// A value with a line break never puts one inside a message, nor inside
// the command a fix suggests.
func TestNoLineBreakInAFix(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(t *testing.T, c *Config)
		says   string
	}{
		{"mesh in the kumactl hint", func(t *testing.T, c *Config) {
			c.Mesh = "pay\nments"
			c.DataplaneTokenFile = tokenFileRaw(t, "garbage", 0o600)
		}, "`kumactl generate dataplane-token --mesh \"pay\\nments\"`"},
		{"token bound to a name with a line break", func(t *testing.T, c *Config) {
			c.DataplaneTokenFile = tokenFile(t, `{"Name":"zp\nrm -rf /"}`, 0o600)
		}, "set --name \"zp\\nrm -rf /\" or issue"},
		{"token bound to a workload with a line break", func(t *testing.T, c *Config) {
			c.DataplaneTokenFile = tokenFile(t, `{"Workload":"a\nb"}`, 0o600)
		}, "set --workload \"a\\nb\" or issue"},
		{"token tag with a line break", func(t *testing.T, c *Config) {
			c.DataplaneTokenFile = tokenFile(t, `{"Tags":{"te\nam":["x"]}}`, 0o600)
		}, "add --label \"te\\nam\"=<value>"},
		{"a path with a line break", func(t *testing.T, c *Config) {
			c.DataplaneTokenFile = filepath.Join(t.TempDir(), "to\nken")
		}, "to\\nken does not exist"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mutate(t, &c)
			_, _, err := problems(t, c, time.Now())
			if err == nil {
				t.Fatal("no problem")
			}
			var merr *multierror.Error
			errors.As(err, &merr)
			found := false
			for _, e := range merr.Errors {
				msg := e.Error()
				found = found || strings.Contains(msg, tc.says)
				var p Problem
				errors.As(e, &p)
				if strings.Contains(msg, "\n") || strings.Contains(p.Message, "\n") {
					t.Errorf("a line break in %q", p.Message)
				}
			}
			if !found {
				t.Errorf("no problem says %q: %v", tc.says, err)
			}
		})
	}
}

// fakeAgent makes the agent run as uid:gid, on a host that knows no
// user or group names.
func fakeAgent(t *testing.T, uid, gid int) {
	agentIDs = func() (int, int) { return uid, gid }
	lookupUser = func(string) (*user.User, error) { return nil, errors.New("no names here") }
	lookupGroup = func(string) (*user.Group, error) { return nil, errors.New("no names here") }
	t.Cleanup(func() {
		agentIDs = func() (int, int) { return os.Geteuid(), os.Getegid() }
		lookupUser, lookupGroup = user.LookupId, user.LookupGroupId
	})
}

// Who can read or replace the token file besides the agent: other users
// whatever the group; the group unless it is the agent's own; an owner
// other than the agent's user or root.
func TestTokenFileExposure(t *testing.T) {
	const agentUID, agentGID, otherUID, otherGID = 990, 990, 1001, 1001
	fakeAgent(t, agentUID, agentGID)
	cases := []struct {
		name string
		fi   token.FileInfo
		want []string // one per warning, in order
	}{
		{"0600 owned by the agent", token.FileInfo{Mode: 0o600, UID: agentUID, GID: agentGID}, nil},
		{"0640 root:agent's group", token.FileInfo{Mode: 0o640, UID: 0, GID: agentGID}, nil},
		{"0600 owned by root", token.FileInfo{Mode: 0o600, UID: 0, GID: 0}, nil},
		{"0660 agent:agent's group", token.FileInfo{Mode: 0o660, UID: agentUID, GID: agentGID}, nil},
		{"0644: other users", token.FileInfo{Mode: 0o644, UID: agentUID, GID: agentGID},
			[]string{"/t has mode 0644: other users can read this credential; chmod 600 it"}},
		{"0602: other users can change it", token.FileInfo{Mode: 0o602, UID: agentUID, GID: agentGID},
			[]string{"other users can change this credential"}},
		{"0640 with another group", token.FileInfo{Mode: 0o640, UID: agentUID, GID: otherGID},
			[]string{"/t has mode 0640 and its group is gid 1001, not the agent's group gid 990: that group's members can read this credential; chmod 600 it, or chgrp it to 990"}},
		{"0600 with another group", token.FileInfo{Mode: 0o600, UID: agentUID, GID: otherGID}, nil},
		{"0600 owned by another user", token.FileInfo{Mode: 0o600, UID: otherUID, GID: agentGID},
			[]string{"/t is owned by uid 1001, neither the agent's user uid 990 nor root: that user can replace this credential; chown it to 990 (or root)"}},
		{"0666 owned by another user and group", token.FileInfo{Mode: 0o666, UID: otherUID, GID: otherGID},
			[]string{"other users can read and change", "that group's members can read and change", "is owned by uid 1001"}},
		{"inline token", token.FileInfo{UID: -1, GID: -1}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := TokenFileExposure("/t", tc.fi)
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %d warnings", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d = %q, want %q", i, got[i], w)
				}
			}
		})
	}
}

// The warnings come with validation, naming --dataplane-token-file.
func TestValidateWarnsAboutWhoCanReadTheToken(t *testing.T) {
	uid, gid := os.Geteuid(), os.Getegid()
	agentIDs = func() (int, int) { return uid + 1, gid + 1 } // another user and group than the file's
	t.Cleanup(func() { agentIDs = func() (int, int) { return os.Geteuid(), os.Getegid() } })
	c := valid()
	c.DataplaneTokenFile = tokenFile(t, `{"Mesh":"payments"}`, 0o600)
	if err := os.Chmod(c.DataplaneTokenFile, 0o640); err != nil {
		t.Fatal(err)
	}
	_, warns, err := problems(t, c, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range warns {
		if w.Key == "dataplane-token-file" {
			got = append(got, w.Message)
		}
	}
	want := []string{"that group's members can read this credential"}
	if uid != 0 {
		want = append(want, "that user can replace this credential")
	}
	if len(got) != len(want) {
		t.Fatalf("warnings %q, want %q", got, want)
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("%q, want %q", got[i], want[i])
		}
	}
}

// A CA file none of whose certificates is valid now: expired on a
// synchronised clock is a configuration error naming the file, the
// certificate and its NotAfter; not valid yet, or a clock that may be
// wrong, a warning (the agent retries).
func TestCAFileTimes(t *testing.T) {
	now := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	write := func(name string, pems ...[]byte) string {
		path := filepath.Join(dir, name)
		var b []byte
		for _, p := range pems {
			b = append(b, p...)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	expired := testutil.CertPEM(t, now.Add(-time.Hour))
	older := testutil.CertPEM(t, now.Add(-24*time.Hour))
	current := testutil.CertPEM(t, now.Add(time.Hour))
	future := testutil.CertPEM(t, now.Add(72*time.Hour)) // valid from now+24h
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		path  string
		clock timesync.Status
		err   string
		warn  string
	}{
		{"valid", write("valid", current), timesync.Status{Synced: true}, "", ""},
		{"one valid beside an expired one", write("rotation", expired, current), timesync.Status{Synced: true}, "", ""},
		{"expired", write("expired", expired), timesync.Status{Synced: true},
			"--ca-cert-file: " + dir + "/expired: its CA certificate \"zp\" expired at 2027-01-15T07:00:00Z (the clock says 2027-01-15T08:00:00Z); the control plane's certificate cannot be verified with it: give the control plane's current CA certificate", ""},
		{"all expired: the latest is named", write("all-expired", older, expired), timesync.Status{Synced: true}, "expired at 2027-01-15T07:00:00Z", ""},
		{"expired, clock not synchronised", write("expired2", expired), timesync.Status{}, "",
			"the system clock is not synchronised (NTP); " + dir + "/expired2 looks unusable: its CA certificate \"zp\" expired at 2027-01-15T07:00:00Z"},
		{"not valid yet", write("future", future), timesync.Status{Synced: true}, "",
			"its CA certificate \"zp\" is not valid before 2027-01-16T08:00:00Z (the clock says 2027-01-15T08:00:00Z); the control plane's certificate cannot be verified until then"},
		{"a named pipe", fifo, timesync.Status{Synced: true}, fifo + ": it is a named pipe (FIFO), not a regular file: give the control plane's CA certificate file", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			c.CACertFile = tc.path
			errs, warns, err := problems(t, c, now, tc.clock)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected %v", err)
			case tc.err != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.err) || OnlyTransient(err)):
				t.Fatalf("got %v, want %q", err, tc.err)
			}
			var w []string
			for _, x := range warns {
				if x.Key == "ca-cert-file" {
					w = append(w, x.Message)
				}
			}
			if (tc.warn == "") != (len(w) == 0) || (tc.warn != "" && !strings.Contains(w[0], tc.warn)) {
				t.Errorf("warnings %q, want %q", w, tc.warn)
			}
		})
	}
}

// An agent running as root is told to give the file to root.
func TestTokenFileExposureForARootAgent(t *testing.T) {
	fakeAgent(t, 0, 0)
	got := TokenFileExposure("/t", token.FileInfo{Mode: 0o600, UID: 1001, GID: 0})
	if want := "/t is owned by uid 1001, not by root, whom the agent runs as: that user can replace this credential; chown it to root"; len(got) != 1 || got[0] != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// `check --instance` run as root judges the token for the unit's user: a
// file that user owns is fine, another user's is not.
func TestTokenFileExposureForTheUnitsUser(t *testing.T) {
	fakeAgent(t, 0, 0)
	RunAs(998, 998)
	if got := TokenFileExposure("/t", token.FileInfo{Mode: 0o600, UID: 998, GID: 998}); len(got) != 0 {
		t.Errorf("the unit's own token file: %q", got)
	}
	if got := TokenFileExposure("/t", token.FileInfo{Mode: 0o600, UID: 1001, GID: 998}); len(got) != 1 || !strings.Contains(got[0], "neither the agent's user uid 998 nor root") {
		t.Errorf("another user's token file: %q", got)
	}
}
