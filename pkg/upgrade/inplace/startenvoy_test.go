package inplace

import (
	"errors"
	"os"
	"testing"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/envoy"
	"github.com/zoneproxy/zoneproxy/pkg/envoy/supervise"
	"github.com/zoneproxy/zoneproxy/pkg/upgrade"
)

// stateHandover hands over st and no file.
type stateHandover struct{ st upgrade.State }

func (h stateHandover) State(v any) error    { *v.(*upgrade.State) = h.st; return nil }
func (stateHandover) File(string) *os.File   { return nil }
func (stateHandover) Close()                 {}
func (h stateHandover) take() *upgrade.Taken { t, _ := upgrade.Take(h); return t }
func handedEnvoy(pid int, launch map[string]string) stateHandover {
	return stateHandover{upgrade.State{Version: upgrade.Version, Envoy: &upgrade.EnvoyState{PID: pid, Launch: launch}}}
}

// adoptingEnvoy starts fake Envoys and takes over running ones.
type adoptingEnvoy struct {
	supervise.Envoy
	adopted []int
}

func (f *adoptingEnvoy) Start(envoy.Spec) (supervise.Process, error) { return newFakeProc(), nil }
func (f *adoptingEnvoy) Adopt(pid int, _ *os.File, _ envoy.Spec) (supervise.Process, error) {
	f.adopted = append(f.adopted, pid)
	if pid < 0 {
		return nil, errors.New("no such process")
	}
	return newFakeProc(), nil
}

// The first start after a reload takes over the Envoy handed over, with
// the launch it was started with; every later one (an undrain) starts a
// new Envoy, counted in Envoy's generation, on this program's launch.
func TestStartEnvoyAdoptsOnceThenStarts(t *testing.T) {
	cfg := &config.Config{Concurrency: 2}
	mine := launchOf(cfg)
	handed := map[string]string{string(config.KeyConcurrency): "1"}
	tests := []struct {
		name        string
		taken       *upgrade.Taken
		cannotAdopt bool
		wantErr     string
		wantAdopted []int
		wantLaunch  map[string]string // after the first start
		wantStarted int               // Envoy generation after two starts
	}{
		{name: "a fresh start", wantLaunch: mine, wantStarted: 2},
		{name: "after a reload", taken: handedEnvoy(77, handed).take(), wantAdopted: []int{77}, wantLaunch: handed, wantStarted: 1},
		{name: "handed over without its launch", taken: handedEnvoy(77, nil).take(), wantAdopted: []int{77}, wantLaunch: mine, wantStarted: 1},
		{name: "the handed-over Envoy is gone", taken: handedEnvoy(-1, handed).take(), wantAdopted: []int{-1}, wantErr: "cannot take over the running Envoy: no such process"},
		{name: "an Envoy that cannot take over", taken: handedEnvoy(77, handed).take(), cannotAdopt: true, wantErr: "this Envoy cannot be taken over"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &adoptingEnvoy{}
			r := newHost(cfg, fake)
			if tt.cannotAdopt {
				r.sup.Envoy = startOnlyEnvoy{fake}
			}
			r.taken = tt.taken
			_, err := r.StartEnvoy(envoy.Spec{Path: "/fake/envoy"})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := r.launch()[string(config.KeyConcurrency)]; got != tt.wantLaunch[string(config.KeyConcurrency)] {
				t.Fatalf("launch recorded --concurrency %q, want %q", got, tt.wantLaunch[string(config.KeyConcurrency)])
			}
			if _, err := r.StartEnvoy(envoy.Spec{Path: "/fake/envoy"}); err != nil {
				t.Fatal(err)
			}
			if len(fake.adopted) != len(tt.wantAdopted) {
				t.Fatalf("adopted %v, want %v", fake.adopted, tt.wantAdopted)
			}
			if got := r.launch()[string(config.KeyConcurrency)]; got != "2" {
				t.Fatalf("after a new start the launch recorded is --concurrency %q, want this program's", got)
			}
			if _, envoyGen, _ := r.record.Generations(); envoyGen != tt.wantStarted {
				t.Fatalf("Envoy generation %d, want %d", envoyGen, tt.wantStarted)
			}
		})
	}
}

// startOnlyEnvoy hides Adopt.
type startOnlyEnvoy struct{ supervise.Envoy }
