// Package sdjob tells a restart from a stop: under systemd, the stop
// signal comes from a job, and the job's type says whether the unit is
// coming straight back (`systemctl restart`, `try-restart`) or going away
// (`systemctl stop`, a shutdown). It asks systemd over D-Bus, on the
// system bus, with read-only calls that need no privilege.
package sdjob

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// AskTimeout bounds the whole question: a stop must not wait on a bus
// that does not answer.
const AskTimeout = time.Second

// restartJobs are the job types whose stop is followed by a start.
// systemd turns try-restart into restart for an active unit; both are
// listed so that either spelling counts.
var restartJobs = map[string]bool{"restart": true, "try-restart": true, "reload-or-restart": true}

// Jobs lists systemd's pending jobs (go-systemd's Conn.ListJobsContext).
type Jobs func(ctx context.Context) ([]sddbus.JobStatus, error)

// Asker asks systemd about the unit this process runs in.
type Asker struct {
	// Unit names the unit; nil reads /proc/self/cgroup.
	Unit func() (string, error)
	// Jobs lists the jobs; nil asks the system bus.
	Jobs Jobs
}

// Restarting says whether the unit's pending job is a restart. Any error
// (no bus, no unit, a timeout) comes back with false: a stop is the safe
// reading, since it withdraws.
func (a Asker) Restarting(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, AskTimeout)
	defer cancel()
	unitOf, jobs := a.Unit, a.Jobs
	if unitOf == nil {
		unitOf = CurrentUnit
	}
	if jobs == nil {
		jobs = systemBusJobs
	}
	unit, err := unitOf()
	if err != nil {
		return false, err
	}
	list, err := jobs(ctx)
	if err != nil {
		return false, fmt.Errorf("cannot list systemd's jobs over D-Bus: %w", err)
	}
	for _, j := range list {
		if j.Unit == unit {
			return restartJobs[j.JobType], nil
		}
	}
	return false, nil
}

// systemBusJobs connects to the system bus for one ListJobs call.
func systemBusJobs(ctx context.Context) ([]sddbus.JobStatus, error) {
	conn, err := sddbus.NewSystemConnectionContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ListJobsContext(ctx)
}

// CurrentUnit is the service unit whose cgroup holds this process.
func CurrentUnit() (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	return unitFromCgroup(f)
}

// errNoUnit: the process runs in no service unit's cgroup.
var errNoUnit = errors.New("this process runs in no systemd service unit")

// unitFromCgroup reads the unit from /proc/self/cgroup: the unified
// hierarchy's line (0::), or the name=systemd one on a legacy host; the
// innermost path element that is a service (a delegated unit may run its
// processes in sub-cgroups of its own).
func unitFromCgroup(r io.Reader) (string, error) {
	var path string
	s := bufio.NewScanner(r)
	for s.Scan() {
		id, rest, _ := strings.Cut(s.Text(), ":")
		ctrl, p, _ := strings.Cut(rest, ":")
		if (id == "0" && ctrl == "") || ctrl == "name=systemd" {
			path = p
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	parts := strings.Split(path, "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if strings.HasSuffix(parts[i], ".service") {
			return parts[i], nil
		}
	}
	return "", errNoUnit
}
