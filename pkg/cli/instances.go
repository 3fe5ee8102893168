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

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
	"github.com/zoneproxy/zoneproxy/pkg/kuma/token"
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
	fs.String("instance", "", "the systemd instance NAME of zoneproxy@NAME: its "+config.KeyConfig.Flag()+" "+defaultInstanceDir+"/NAME.yaml and the variables of NAME.env, as the unit gets them")
	fs.String("instance-dir", defaultInstanceDir, "where instances' NAME.yaml and NAME.env are")
	_ = fs.MarkHidden("instance-dir")
}

// errInstanceAndConfig refuses two names for one configuration.
var errInstanceAndConfig = usageError{"--instance and " + config.KeyConfig.Flag() + " name the configuration both: give one"}

// useInstance makes the command's configuration that of zoneproxy@name:
// --config <dir>/<name>.yaml, and the ZONEPROXY_* variables of
// <dir>/<name>.env in place of the caller's own, which the unit does not
// see. It returns the name; without --instance it does nothing.
func useInstance(fs *pflag.FlagSet) (string, error) {
	name, _ := fs.GetString("instance")
	if name == "" {
		return "", nil
	}
	if fs.Changed(string(config.KeyConfig)) {
		return "", errInstanceAndConfig
	}
	dir, _ := fs.GetString("instance-dir")
	path, env, err := instanceFiles(dir, name)
	if err != nil {
		return "", err
	}
	if err := fs.Set(string(config.KeyConfig), path); err != nil {
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
	env, err := readEnvFile(filepath.Join(dir, name+".env"))
	if err != nil {
		return "", nil, fmt.Errorf("--instance %s: %w", name, err)
	}
	return path, env, nil
}

// maxEnvFile bounds an instance's NAME.env: a few variables, a token at most.
const maxEnvFile = 64 << 10

// readEnvFile reads an instance's variables, nil when it has none. It
// reads as the token file is read (a regular file of bounded size, opened
// without blocking) and never quotes the file: it may be a link to
// another file, such as /etc/shadow.
func readEnvFile(path string) (map[string]string, error) {
	raw, _, err := token.ReadRegular(path, maxEnvFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case errors.Is(err, os.ErrPermission):
		return nil, fmt.Errorf("cannot read %s: permission denied (it is the unit's and may hold a token: run as root)", path)
	case err != nil:
		return nil, fmt.Errorf("cannot read %s: %v: make it a regular file of KEY=VALUE lines", path, errtext.PathCause(err))
	}
	env, err := godotenv.UnmarshalBytes(raw)
	if err != nil {
		// godotenv's message quotes the text it could not parse.
		return nil, fmt.Errorf("%s is not KEY=VALUE lines (systemd's EnvironmentFile): fix its syntax", path)
	}
	return env, nil
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
