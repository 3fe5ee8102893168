package sdjob

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

func TestRestartingReadsTheUnitsJob(t *testing.T) {
	const unit = "zoneproxy@payments-egress.service"
	other := sddbus.JobStatus{Id: 7, Unit: "zoneproxy@payments-ingress.service", JobType: "restart"}
	for _, tt := range []struct {
		name    string
		jobs    []sddbus.JobStatus
		listErr error
		want    bool
		wantErr bool
	}{
		{name: "systemctl restart", jobs: []sddbus.JobStatus{other, {Id: 8, Unit: unit, JobType: "restart"}}, want: true},
		{name: "systemctl try-restart", jobs: []sddbus.JobStatus{{Unit: unit, JobType: "try-restart"}}, want: true},
		{name: "systemctl stop", jobs: []sddbus.JobStatus{other, {Unit: unit, JobType: "stop"}}},
		{name: "no job: a signal sent by hand", jobs: []sddbus.JobStatus{other}},
		{name: "no bus", listErr: errors.New("dial unix /run/dbus/system_bus_socket: connect: no such file or directory"), wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := Asker{
				Unit: func() (string, error) { return unit, nil },
				Jobs: func(context.Context) ([]sddbus.JobStatus, error) { return tt.jobs, tt.listErr },
			}
			got, err := a.Restarting(context.Background())
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Fatalf("Restarting() = %t, %v; want %t (error: %t)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// A bus that does not answer costs the stop at most AskTimeout, and reads
// as a stop.
func TestRestartingGivesUpOnASilentBus(t *testing.T) {
	a := Asker{
		Unit: func() (string, error) { return "zoneproxy@x.service", nil },
		Jobs: func(ctx context.Context) ([]sddbus.JobStatus, error) { <-ctx.Done(); return nil, ctx.Err() },
	}
	start := time.Now()
	got, err := a.Restarting(context.Background())
	if got || err == nil {
		t.Fatalf("Restarting() = %t, %v; want false with an error", got, err)
	}
	if took := time.Since(start); took > AskTimeout+5*time.Second {
		t.Fatalf("took %s", took)
	}
}

func TestUnitFromCgroup(t *testing.T) {
	for _, tt := range []struct{ name, cgroup, want string }{
		{"unified", "0::/system.slice/system-zoneproxy.slice/zoneproxy@payments-egress.service\n", "zoneproxy@payments-egress.service"},
		{"delegated sub-cgroup", "0::/system.slice/zoneproxy@a.service/agent\n", "zoneproxy@a.service"},
		{"legacy", "12:pids:/system.slice/x.service\n1:name=systemd:/system.slice/zoneproxy@b.service\n", "zoneproxy@b.service"},
		{"a user's shell", "0::/user.slice/user-1000.slice/session-3.scope\n", ""},
		{"a container's root", "0::/\n", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := unitFromCgroup(strings.NewReader(tt.cgroup))
			if got != tt.want || (err != nil) != (tt.want == "") {
				t.Fatalf("unitFromCgroup = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
