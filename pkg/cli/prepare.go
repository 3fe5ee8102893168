package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
)

// A validation checks a loaded configuration for one command; src answers
// for the command's settings outside the Config.
type validation func(cfg *config.Config, src *source) ([]config.Warning, error)

var (
	// fullCheck is run's, check's and bootstrap's: everything, files included.
	fullCheck validation = func(cfg *config.Config, _ *source) ([]config.Warning, error) {
		return cfg.Validate(time.Now())
	}
	// resourceCheck is render's: only what the printed resource needs.
	resourceCheck validation = func(cfg *config.Config, _ *source) ([]config.Warning, error) {
		return nil, cfg.ValidateResource()
	}
)

// prepared is what a command starts from.
type prepared struct {
	cfg        *config.Config
	log        *zap.Logger
	logLevel   zap.AtomicLevel // /logging changes it while run runs
	configFile string          // the --config file, "" for none
}

// prepare loads the configuration, validates it and builds the logger.
// Configuration problems are printed, all of them, and map to exit 78.
func prepare(cmd *cobra.Command, validate validation) (*prepared, error) {
	stderr := cmd.ErrOrStderr()
	cfg, src, err := loadConfig(cmd.Flags())
	var warnings []config.Warning
	if cfg != nil {
		cfg.Complete(config.LocalHost())
		var verr error
		warnings, verr = validate(cfg, src)
		err = multierror.Append(err, verr).ErrorOrNil()
	}
	if err != nil {
		// One heading per exit code: "invalid configuration" is 78 only.
		if config.OnlyTransient(err) {
			printProblems(stderr, "cannot start yet", nameSources(err, cmd.Flags(), src))
			return nil, reportedError{err} // exit 1: a restart may find it fixed
		}
		printProblems(stderr, "invalid configuration", nameSources(err, cmd.Flags(), src))
		return nil, reportedError{exitcode.AsConfig(err)}
	}
	p := &prepared{cfg: cfg, logLevel: parseLevel(cfg.LogLevel), configFile: src.path}
	p.log = newLogger(stderr, p.logLevel, cfg.LogFormat)
	for _, w := range warnings {
		p.log.Warn(w.Message, zap.String("setting", w.Key.Flag()))
	}
	return p, nil
}

// nameSources names a problem's variable or config file when the setting
// is not a flag of this command: "--drain-time" would send the operator
// looking for a flag that `render dataplane` does not have.
func nameSources(err error, fs *pflag.FlagSet, src *source) error {
	var merr *multierror.Error
	if src == nil || !errors.As(err, &merr) {
		return err
	}
	out := &multierror.Error{}
	for _, e := range merr.Errors {
		var p config.Problem
		if errors.As(e, &p) && fs.Lookup(string(p.Key)) == nil {
			if _, ok := lookupSetting(string(p.Key)); ok {
				switch _, from := src.lookup(p.Key); from {
				case fromEnv:
					e = config.Problem{Key: config.Key(p.Key.Env()), Message: p.Message, Transient: p.Transient}
				case fromFile:
					e = config.Problem{Key: config.KeyConfig, Message: fmt.Sprintf("%s in %s: %s", p.Key, src.path, p.Message), Transient: p.Transient}
				}
			}
		}
		out.Errors = append(out.Errors, e)
	}
	return out
}

// printProblems lists every problem under heading, which says what the
// exit code means.
func printProblems(w io.Writer, heading string, err error) {
	var merr *multierror.Error
	if !errors.As(err, &merr) || len(merr.Errors) == 0 {
		fmt.Fprintln(w, "zoneproxy: "+heading+": "+err.Error())
		return
	}
	n := len(merr.Errors)
	noun := "problem"
	if n > 1 {
		noun = "problems"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "zoneproxy: %s (%d %s):\n", heading, n, noun)
	for _, e := range merr.Errors {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	fmt.Fprint(w, b.String())
}
