package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/joho/godotenv"
	"github.com/spf13/pflag"
)

// defaultInstanceDir is where the unit zoneproxy@NAME reads NAME.yaml and,
// if present, NAME.env (systemd/zoneproxy@.service).
const defaultInstanceDir = "/etc/zoneproxy"

// instanceName is what systemd takes as an instance name here: a file name
// in the instance dir, without a path.
var instanceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:@-]*$`)

// addInstanceFlags adds --instance (and the hidden --instance-dir tests
// and unusual layouts use) to a command that finds a running instance.
func addInstanceFlags(fs *pflag.FlagSet) {
	fs.String("instance", "", "the systemd instance NAME of zoneproxy@NAME: its --config "+defaultInstanceDir+"/NAME.yaml and the variables of NAME.env, as the unit gets them")
	fs.String("instance-dir", defaultInstanceDir, "where instances' NAME.yaml and NAME.env are")
	_ = fs.MarkHidden("instance-dir")
}

// useInstance makes the command's configuration that of zoneproxy@name:
// --config <dir>/<name>.yaml, and the ZONEPROXY_* variables of
// <dir>/<name>.env in place of the caller's own, which the unit does not
// see. It returns the name; without --instance it does nothing.
func useInstance(fs *pflag.FlagSet) (string, error) {
	name, _ := fs.GetString("instance")
	if name == "" {
		return "", nil
	}
	if fs.Changed("config") {
		return "", usageError{"--instance and --config name the configuration both: give one"}
	}
	dir, _ := fs.GetString("instance-dir")
	path, env, err := instanceFiles(dir, name)
	if err != nil {
		return "", err
	}
	if err := fs.Set("config", path); err != nil {
		return "", err
	}
	setInstanceEnv(env)
	return name, nil
}

// instanceFiles checks that instance name exists in dir and reads its
// environment file, if any.
func instanceFiles(dir, name string) (string, map[string]string, error) {
	if !instanceName.MatchString(name) {
		return "", nil, usageError{fmt.Sprintf("--instance %q: give the instance name of zoneproxy@NAME, e.g. payments-egress", name)}
	}
	path := filepath.Join(dir, name+".yaml")
	if _, err := os.Stat(path); err != nil {
		known := ""
		if names, _ := listInstances(dir); len(names) > 0 {
			known = " (instances here: " + strings.Join(names, ", ") + ")"
		}
		return "", nil, fmt.Errorf("--instance %s: no %s%s", name, path, known)
	}
	env, err := godotenv.Read(filepath.Join(dir, name+".env"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		env = nil
	case errors.Is(err, os.ErrPermission):
		return "", nil, fmt.Errorf("--instance %s: cannot read %s: permission denied (it is the unit's and may hold a token: run as root)", name, filepath.Join(dir, name+".env"))
	case err != nil:
		return "", nil, fmt.Errorf("--instance %s: %s: %w", name, filepath.Join(dir, name+".env"), err)
	}
	return path, env, nil
}

// setInstanceEnv replaces the process's ZONEPROXY_* variables with env's.
func setInstanceEnv(env map[string]string) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix) {
			os.Unsetenv(k)
		}
	}
	for k, v := range env {
		if strings.HasPrefix(k, envPrefix) {
			os.Setenv(k, v)
		}
	}
}

// listInstances names the instances configured in dir.
func listInstances(dir string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range paths {
		if n := strings.TrimSuffix(filepath.Base(p), ".yaml"); instanceName.MatchString(n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}
