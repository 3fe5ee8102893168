package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
)

// unitSandbox is what the unit zoneproxy@NAME runs as and under, as
// `systemctl show` tells it (the unit file and its drop-ins).
type unitSandbox struct {
	Unit              string
	User              string // "" is root
	ProtectHome       string // no, yes, read-only, tmpfs
	ProtectSystem     string // no, yes, full, strict
	PrivateTmp        bool
	ReadWritePaths    []string
	InaccessiblePaths []string
	RuntimeDirectory  string // relative to /run, e.g. zoneproxy/payments-egress
	StateDirectory    string // relative to /var/lib
}

var unitProperties = []string{"User", "ProtectHome", "ProtectSystem", "PrivateTmp", "ReadWritePaths", "InaccessiblePaths", "RuntimeDirectory", "StateDirectory"}

// showUnit runs `systemctl show`; tests replace it.
var showUnit = func(ctx context.Context, unit string) ([]byte, error) {
	args := []string{"show", unit}
	for _, p := range unitProperties {
		args = append(args, "-p", p)
	}
	out, err := exec.CommandContext(ctx, "systemctl", args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("systemctl show %s: %s", unit, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// readUnit reads the sandbox of zoneproxy@name.
func readUnit(ctx context.Context, name string) (*unitSandbox, error) {
	u := &unitSandbox{Unit: "zoneproxy@" + name + ".service"}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := showUnit(ctx, u.Unit)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "User":
			u.User = v
		case "ProtectHome":
			u.ProtectHome = v
		case "ProtectSystem":
			u.ProtectSystem = v
		case "PrivateTmp":
			u.PrivateTmp = v == "yes"
		case "ReadWritePaths":
			u.ReadWritePaths = strings.Fields(v)
		case "InaccessiblePaths":
			u.InaccessiblePaths = strings.Fields(v)
		case "RuntimeDirectory":
			u.RuntimeDirectory, _, _ = strings.Cut(v, " ")
		case "StateDirectory":
			u.StateDirectory, _, _ = strings.Cut(v, " ")
		}
	}
	return u, nil
}

// directories are the unit's work and state dirs, as systemd hands them
// to the agent ($RUNTIME_DIRECTORY, $STATE_DIRECTORY).
func (u *unitSandbox) directories() (runtime, state string) {
	if u.RuntimeDirectory != "" {
		runtime = filepath.Join("/run", u.RuntimeDirectory)
	}
	if u.StateDirectory != "" {
		state = filepath.Join("/var/lib", u.StateDirectory)
	}
	return runtime, state
}

// under reports whether path is dir or inside it.
func under(path, dir string) bool {
	dir = strings.TrimPrefix(strings.TrimPrefix(dir, "-"), "+")
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// hides says why the unit's sandbox hides path from it, "" if it does not.
func (u *unitSandbox) hides(path string) string {
	switch u.ProtectHome {
	case "yes", "tmpfs":
		for _, home := range []string{"/home", "/root", "/run/user"} {
			if under(path, home) {
				return fmt.Sprintf("ProtectHome=%s hides %s from the unit", u.ProtectHome, home)
			}
		}
	}
	if u.PrivateTmp {
		for _, tmp := range []string{"/tmp", "/var/tmp"} {
			if under(path, tmp) {
				return fmt.Sprintf("PrivateTmp=yes gives the unit its own %s", tmp)
			}
		}
	}
	for _, p := range u.InaccessiblePaths {
		if under(path, p) {
			return "InaccessiblePaths= names " + p
		}
	}
	return ""
}

// readOnly says why the sandbox keeps the unit from writing dir, "" if
// it does not.
func (u *unitSandbox) readOnly(dir string) string {
	runtime, state := u.directories()
	for _, rw := range append([]string{runtime, state}, u.ReadWritePaths...) {
		if rw != "" && under(dir, rw) {
			return ""
		}
	}
	if u.PrivateTmp && (under(dir, "/tmp") || under(dir, "/var/tmp")) {
		return ""
	}
	switch {
	case u.ProtectSystem == "strict":
		return "ProtectSystem=strict makes every path read-only but the unit's RuntimeDirectory, StateDirectory and ReadWritePaths"
	case u.ProtectHome == "read-only" && (under(dir, "/home") || under(dir, "/root") || under(dir, "/run/user")):
		return "ProtectHome=read-only"
	case (u.ProtectSystem == "yes" || u.ProtectSystem == "full") && (under(dir, "/usr") || under(dir, "/boot") || under(dir, "/efi")):
		return "ProtectSystem=" + u.ProtectSystem + " makes /usr and /boot read-only"
	}
	return ""
}

// unitFile is a path the unit reads, writes or runs.
type unitFile struct {
	setting, path string
	test          string // test(1)'s flag: -r, -x, or -w for a directory
}

// unitFiles are the paths the configuration makes the unit use; the work
// and state dirs only when set apart from the unit's own.
func unitFiles(cfg *config.Config, configFile string, u *unitSandbox) []unitFile {
	files := []unitFile{{config.KeyConfig.Flag(), configFile, "-r"}}
	if cfg.DataplaneTokenFile != "" {
		files = append(files, unitFile{config.KeyDataplaneTokenFile.Flag(), cfg.DataplaneTokenFile, "-r"})
	}
	if cfg.CACertFile != "" {
		files = append(files, unitFile{config.KeyCACertFile.Flag(), cfg.CACertFile, "-r"})
	}
	if bin, err := exec.LookPath(cfg.EnvoyBinary); err == nil {
		files = append(files, unitFile{config.KeyEnvoyBinary.Flag(), bin, "-x"})
	}
	runtime, state := u.directories()
	if cfg.WorkDir != "" && cfg.WorkDir != runtime {
		files = append(files, unitFile{config.KeyWorkDir.Flag(), cfg.WorkDir, "-w"})
	}
	if cfg.StateDir != "" && cfg.StateDir != state {
		files = append(files, unitFile{config.KeyStateDir.Flag(), cfg.StateDir, "-w"})
	}
	return files
}

// accessAs runs test(1) as the user: the kernel's own answer, groups and
// ACLs included. Tests replace it.
var accessAs = func(ctx context.Context, usr *user.User, flag, path string) bool {
	cmd := exec.CommandContext(ctx, "test", flag, path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credentialOf(usr)}
	return cmd.Run() == nil
}

// credentialOf is what a child runs as to run as usr: its uid, gid and
// groups.
func credentialOf(usr *user.User) *syscall.Credential {
	uid, _ := strconv.ParseUint(usr.Uid, 10, 32)
	gid, _ := strconv.ParseUint(usr.Gid, 10, 32)
	var groups []uint32
	if ids, err := usr.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil {
				groups = append(groups, uint32(g))
			}
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}
}

// lookupUser finds the unit's user, geteuid who runs check; tests
// replace them.
var (
	lookupUser = user.Lookup
	geteuid    = os.Geteuid
)

// checkUnit checks what the unit's user and sandbox let it reach: a check
// run as root passes files the unit itself cannot read.
func (c *checklist) checkUnit(ctx context.Context, cfg *config.Config, configFile string, u *unitSandbox) {
	who := u.User
	if who == "" {
		who = "root"
	}
	var usr *user.User
	switch {
	case who == "root":
	case geteuid() != 0:
		c.note("%s runs as %s: run `zoneproxy check --instance` as root to check what that user can read", u.Unit, who)
	default:
		var err error
		if usr, err = lookupUser(who); err != nil {
			c.fail(u.Unit+" runs as "+who, fmt.Errorf("there is no user %s on this host: install the package (it creates the user) or change User= in the unit", who))
			return
		}
	}
	failed := 0
	for _, f := range unitFiles(cfg, configFile, u) {
		verb := map[string]string{"-r": "read", "-x": "run", "-w": "write"}[f.test]
		if why := u.hides(f.path); why != "" {
			failed++
			c.fail(fmt.Sprintf("%s cannot %s %s %s", u.Unit, verb, f.setting, f.path),
				fmt.Errorf("%s: move it elsewhere (e.g. /etc/zoneproxy/) or relax the setting with `systemctl edit %s`", why, u.Unit))
			continue
		}
		if f.test == "-w" {
			if why := u.readOnly(f.path); why != "" {
				failed++
				c.fail(fmt.Sprintf("%s cannot write %s %s", u.Unit, f.setting, f.path),
					fmt.Errorf("%s: leave %s unset (the unit has its own) or add ReadWritePaths=%s with `systemctl edit %s`", why, f.setting, f.path, u.Unit))
				continue
			}
			if _, err := os.Stat(f.path); err != nil {
				continue // run creates it: the work dir check above judges its parents
			}
		}
		if usr != nil && !accessAs(ctx, usr, f.test, f.path) {
			failed++
			c.fail(fmt.Sprintf("%s runs as %s, which cannot %s %s %s", u.Unit, who, verb, f.setting, f.path),
				fmt.Errorf("permission denied for %s: e.g. chown root:%s and chmod 0640 a file (0750 a directory on the way), or choose a path that user can %s", who, who, verb))
		}
	}
	if failed == 0 {
		c.ok("%s (user %s, its sandbox) can reach every file its configuration names", u.Unit, who)
	}
}

// unitCheck is what `check --instance` knows of the unit: its sandbox,
// or why it could not be read.
type unitCheck struct {
	sandbox    *unitSandbox
	err        error
	configFile string
}

// useUnitDirectories hands the process the directories systemd gives
// zoneproxy@name's agent ($RUNTIME_DIRECTORY, $STATE_DIRECTORY), so that
// the configuration is completed as the unit's is: its work dir is where
// the running agent holds its lock.
func useUnitDirectories(ctx context.Context, name string) (*unitSandbox, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	u, err := readUnit(ctx, name)
	if err != nil {
		return nil, err
	}
	runtime, state := u.directories()
	for k, v := range map[string]string{"RUNTIME_DIRECTORY": runtime, "STATE_DIRECTORY": state} {
		if v != "" {
			os.Setenv(k, v)
		}
	}
	return u, nil
}

// instanceUnit reads zoneproxy@name's sandbox and hands the process the
// directories systemd would give the agent, so that the configuration is
// completed as the unit's is.
func instanceUnit(ctx context.Context, name string) *unitCheck {
	u, err := useUnitDirectories(ctx, name)
	if err != nil {
		return &unitCheck{err: err}
	}
	// The token file's owner and mode are judged for the unit's user.
	if u.User != "" {
		if usr, err := lookupUser(u.User); err == nil {
			uid, _ := strconv.Atoi(usr.Uid)
			gid, _ := strconv.Atoi(usr.Gid)
			config.RunAs(uid, gid)
		}
	}
	return &unitCheck{sandbox: u}
}

func (c *checklist) checkUnitOf(ctx context.Context, cfg *config.Config, u *unitCheck) {
	if u.sandbox == nil {
		c.note("the unit's user and sandbox are not checked: %v", u.err)
		return
	}
	c.checkUnit(ctx, cfg, u.configFile, u.sandbox)
}

// probeAsUnitUser makes check run Envoy's --version as the unit's user
// when root checks an instance that runs as another: root must not run
// a binary that user may have replaced.
func probeAsUnitUser(ctx context.Context, unit *unitCheck) context.Context {
	if unit == nil || unit.sandbox == nil || geteuid() != 0 {
		return ctx
	}
	who := unit.sandbox.User
	if who == "" || who == "root" {
		return ctx
	}
	usr, err := lookupUser(who)
	if err != nil {
		return ctx // checkUnit fails it, naming the missing user
	}
	return envoy.AsUser(ctx, credentialOf(usr))
}

// replaceableBy says who but root can replace the file at path, by
// writing it or a directory above it; "" when no one can. A directory
// with the sticky bit (/tmp) lets others add files, not replace root's.
func replaceableBy(path string) string {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	for p := resolved; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return ""
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return ""
		}
		// A sticky directory (/tmp) lets others add entries, not replace
		// root's, and the entry below was checked already.
		sticky := p != resolved && fi.Mode()&os.ModeSticky != 0
		switch perm := fi.Mode().Perm(); {
		case st.Uid != 0:
			return fmt.Sprintf("%s is owned by uid %d", p, st.Uid)
		case perm&0o002 != 0 && !sticky:
			return fmt.Sprintf("%s is writable by every user", p)
		case perm&0o020 != 0 && st.Gid != 0 && !sticky:
			return fmt.Sprintf("%s is writable by group %d", p, st.Gid)
		}
		if p == "/" {
			return ""
		}
	}
}
