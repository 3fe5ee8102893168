package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
)

type checkLevel bool

const (
	fullCheck     checkLevel = true  // run, check, bootstrap: everything, files included
	resourceCheck checkLevel = false // render: only what the printed resource needs
)

// prepare loads and validates the configuration and builds the logger.
// Configuration problems are printed, all of them, and map to exit 78.
func prepare(cmd *cobra.Command, level checkLevel) (*config.Config, *zap.Logger, zap.AtomicLevel, error) {
	return prepareWith(cmd, level, nil)
}

// prepareWith also reads settings outside the Config with more, whose
// problems are reported with the others.
func prepareWith(cmd *cobra.Command, level checkLevel, more func(cfg *config.Config, v *viper.Viper) error) (*config.Config, *zap.Logger, zap.AtomicLevel, error) {
	stderr := cmd.ErrOrStderr()
	cfg, v, err := loadConfig(cmd.Flags())
	var warnings []config.Warning
	if cfg != nil {
		cfg.Complete(config.LocalHost())
		var verr error
		if level == fullCheck {
			warnings, verr = cfg.Validate(time.Now())
		} else {
			verr = cfg.ValidateResource()
		}
		err = multierror.Append(err, verr).ErrorOrNil()
		if more != nil {
			err = multierror.Append(err, more(cfg, v)).ErrorOrNil()
		}
	}
	if err != nil {
		printProblems(stderr, nameSources(err, cmd.Flags(), v))
		return nil, nil, zap.AtomicLevel{}, reportedError{exitcode.AsConfig(err)}
	}
	logLevel := parseLevel(cfg.LogLevel)
	log := newLogger(stderr, logLevel, cfg.LogFormat)
	for _, w := range warnings {
		log.Warn(w.Message, zap.String("setting", "--"+w.Key))
	}
	return cfg, log, logLevel, nil
}

// nameSources names a problem's variable or config file when the setting
// is not a flag of this command: "--drain-time" would send the operator
// looking for a flag that `render dataplane` does not have.
func nameSources(err error, fs *pflag.FlagSet, v *viper.Viper) error {
	var merr *multierror.Error
	if v == nil || !errors.As(err, &merr) {
		return err
	}
	out := &multierror.Error{}
	for _, e := range merr.Errors {
		var p config.Problem
		if errors.As(e, &p) && fs.Lookup(p.Key) == nil {
			if _, ok := lookupSetting(p.Key); ok {
				if _, set := os.LookupEnv(envName(p.Key)); set {
					e = config.Problem{Key: envName(p.Key), Message: p.Message}
				} else if v.InConfig(p.Key) {
					e = config.Problem{Key: "config", Message: fmt.Sprintf("%s in %s: %s", p.Key, v.ConfigFileUsed(), p.Message)}
				}
			}
		}
		out.Errors = append(out.Errors, e)
	}
	return out
}

func printProblems(w io.Writer, err error) {
	var merr *multierror.Error
	if !errors.As(err, &merr) || len(merr.Errors) == 0 {
		fmt.Fprintln(w, "zoneproxy: invalid configuration: "+err.Error())
		return
	}
	n := len(merr.Errors)
	noun := "problem"
	if n > 1 {
		noun = "problems"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "zoneproxy: invalid configuration (%d %s):\n", n, noun)
	for _, e := range merr.Errors {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	fmt.Fprint(w, b.String())
}
