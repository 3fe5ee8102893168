package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/zoneproxy/zoneproxy/pkg/agent"
	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/host/preflight"
	"github.com/zoneproxy/zoneproxy/pkg/state"
)

// statusSchema is the version of `status -o json`'s shape: fields are only
// ever added under it.
const statusSchema = 1

// statusReport is `zoneproxy status -o json`.
type statusReport struct {
	Schema    int              `json:"schemaVersion"`
	Instances []instanceStatus `json:"instances"`
	dir       string           // where the instances were looked for
}

// instanceStatus is one instance: where its configuration is, whether it
// runs, and what its agent's GET /status says.
type instanceStatus struct {
	Instance string        `json:"instance,omitempty"` // NAME of zoneproxy@NAME; "" for --config
	Config   string        `json:"config"`
	PID      int           `json:"pid,omitempty"`
	Running  bool          `json:"running"`
	Status   *agent.Status `json:"status,omitempty"`
	Error    string        `json:"error,omitempty"`
	// Note is a reminder for the operator: an ingress that is not READY
	// must not be what a MeshZoneAddress points at.
	Note string `json:"note,omitempty"`
}

// statusNote is the reminder for an instance of role in phase, "" if none.
func statusNote(role config.Role, phase state.Phase) string {
	if role.HasIngress() && phase != state.Ready {
		return mzaReminder
	}
	return ""
}

// mzaReminder is Note for an ingress that cannot serve.
const mzaReminder = "a MeshZoneAddress that points at this ingress sends other zones' traffic to a proxy that cannot serve it: apply it only once this says READY, and to roll back delete it before stopping the ingress"

func newStatusCommand() *cobra.Command {
	var output string
	var names []string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the local zone proxies: phase, reason, Envoy, cache, drain, and what kuma-cp makes of each",
		Long: `status lists the zone proxies of this host, each as its agent's GET /status
tells it: the phase and its reason, since when, Envoy's PID and build, the
last-known-good cache in use or not, the drain, and what kuma-cp is expected
to make of the proxy now.

Without --instance or --config, every instance configured in
` + defaultInstanceDir + ` (NAME.yaml, the unit zoneproxy@NAME) is listed. --instance
(repeatable) lists those; --config lists the instance of that file.
-o json prints {"schemaVersion": 1, "instances": [...]}: see the operator
guide for its fields, which are only ever added to.

Exit codes: 0 every instance listed answered (whatever its phase), or
none is configured (an empty list); 1 one
did not (not running, or its configuration cannot be read); 64 a command
line zoneproxy cannot parse.`,
		Example: `  zoneproxy status
  zoneproxy status --instance payments-egress -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return usageError{fmt.Sprintf("--output %q: use text or json", output)}
			}
			report, err := collectStatus(cmd, names)
			if err != nil {
				return err
			}
			return printStatus(cmd.OutOrStdout(), output, report)
		},
	}
	fs := cmd.Flags()
	addFlags(fs, config.KeyConfig)
	fs.StringArrayVar(&names, "instance", nil, "the systemd instance NAME of zoneproxy@NAME (repeatable; default: every instance in "+defaultInstanceDir+")")
	fs.String("instance-dir", defaultInstanceDir, "where instances' NAME.yaml and NAME.env are")
	_ = fs.MarkHidden("instance-dir")
	fs.StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

// collectStatus asks each instance for its status.
func collectStatus(cmd *cobra.Command, names []string) (*statusReport, error) {
	fs := cmd.Flags()
	dir, _ := fs.GetString("instance-dir")
	report := &statusReport{Schema: statusSchema, Instances: []instanceStatus{}, dir: dir}
	if fs.Changed(string(config.KeyConfig)) {
		if len(names) > 0 {
			return nil, errInstanceAndConfig
		}
		path, _ := fs.GetString(string(config.KeyConfig))
		report.Instances = append(report.Instances, askInstance(cmd, instanceStatus{Config: path}, nil))
		return report, nil
	}
	if len(names) == 0 {
		var err error
		if names, err = listInstances(dir); err != nil {
			return nil, fmt.Errorf("cannot list the instances in %s: %v", dir, err)
		}
	}
	for _, name := range names {
		path, env, err := instanceFiles(dir, name)
		st := instanceStatus{Instance: name, Config: path}
		if err != nil {
			st.Error = err.Error()
			report.Instances = append(report.Instances, st)
			continue
		}
		report.Instances = append(report.Instances, askInstance(cmd, st, env))
	}
	return report, nil
}

// askInstance loads st's configuration (with env as its variables, when
// it is a unit's) and asks its agent.
func askInstance(cmd *cobra.Command, st instanceStatus, env map[string]string) instanceStatus {
	if st.Instance != "" {
		setInstanceEnv(env)
	}
	fs := cmd.Flags()
	_ = fs.Set(string(config.KeyConfig), st.Config)
	cfg, _, err := loadConfig(fs)
	if err != nil {
		st.Error = "its configuration cannot be read: " + strings.ReplaceAll(err.Error(), "\n", " ")
		return st
	}
	cfg.Complete(config.LocalHost())
	if in := findInstance(cfg, st.Config); in != nil {
		st.PID = in.pid
	}
	addr := preflight.ReadinessPort(cfg).Addr
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
	defer cancel()
	code, body, err := call(ctx, http.MethodGet, "http://"+addr+"/status")
	switch {
	case err != nil:
		st.Error = fmt.Sprintf("not running: nothing answers on %s", addr)
		if st.PID != 0 {
			st.Error = fmt.Sprintf("zoneproxy (pid %d) does not answer on %s: %v", st.PID, addr, err)
		}
		return st
	case code != http.StatusOK:
		st.Error = fmt.Sprintf("%s answered %d to GET /status: %s", addr, code, strings.TrimSpace(body))
		return st
	}
	var s agent.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		st.Error = fmt.Sprintf("%s answered GET /status with something other than zoneproxy's status: %v", addr, err)
		return st
	}
	st.Running, st.Status = true, &s
	st.Note = statusNote(cfg.Role, state.Phase(s.Phase))
	return st
}

func printStatus(w io.Writer, output string, r *statusReport) error {
	failed := 0
	for _, in := range r.Instances {
		if in.Error != "" {
			failed++
		}
	}
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else if len(r.Instances) == 0 {
		fmt.Fprintf(w, "no instance: none is configured in %s (NAME.yaml for zoneproxy@NAME)\n", r.dir)
	} else {
		for i, in := range r.Instances {
			if i > 0 {
				fmt.Fprintln(w)
			}
			writeInstance(w, in)
		}
	}
	if failed > 0 {
		return reportedError{fmt.Errorf("%d of %d instances did not answer", failed, len(r.Instances))}
	}
	return nil
}

// writeInstance writes one instance as lines an operator reads.
func writeInstance(w io.Writer, in instanceStatus) {
	name := in.Instance
	if name == "" {
		name = in.Config
	}
	if in.Error != "" {
		fmt.Fprintf(w, "%s: %s\n", name, in.Error)
		return
	}
	s := in.Status
	fmt.Fprintf(w, "%s: %s since %s (%s ago)\n", name, s.Phase, s.Since.UTC().Format(time.RFC3339), time.Since(s.Since).Round(time.Second))
	row := func(k, v string) { fmt.Fprintf(w, "  %-14s %s\n", k+":", v) }
	row("reason", s.Detail)
	if in.PID != 0 {
		row("agent", fmt.Sprintf("pid %d", in.PID))
	}
	if s.Envoy != nil {
		row("envoy", envoyLine(s.Envoy))
	}
	row("cache", cacheLine(s))
	if s.Drain != "" {
		row("drain", s.Drain)
	}
	if s.Stop != "" {
		row("stopping", stopWords[s.Stop])
	}
	cp := "Envoy talks to the control plane directly"
	if s.ControlPlane.State != "" {
		cp = string(s.ControlPlane.State) + ": " + s.ControlPlane.Says
	} else if s.ControlPlane.Says != "" {
		cp = s.ControlPlane.Says
	}
	row("control plane", cp)
	if pc := s.ProtocolChange; pc != nil {
		row("ADS protocol", pc.State+" since "+pc.Since.UTC().Format(time.RFC3339)+": "+pc.Says)
	}
	if in.Note != "" {
		row("note", in.Note)
	}
}

// stopWords say what a stop under way does with kuma-cp's egress set.
var stopWords = map[string]string{
	"restart": "for a restart: the proxy comes straight back (a zone egress stays in kuma-cp's egress set)",
	"stop":    "for a stop (a zone egress leaves kuma-cp's egress set first)",
}

func envoyLine(e *agent.EnvoyStatus) string {
	if e.PID == 0 {
		return "not running"
	}
	s := fmt.Sprintf("pid %d", e.PID)
	if e.Build != "" {
		s += ", " + e.Build
	}
	return s
}

func cacheLine(s *agent.Status) string {
	if s.Cache == nil || !s.Cache.InUse {
		return "not in use: the configuration comes from the control plane"
	}
	return fmt.Sprintf("IN USE: the configuration of %s, served since %s", s.Cache.WrittenAt.UTC().Format(time.RFC3339), s.Cache.Since.UTC().Format(time.RFC3339))
}
