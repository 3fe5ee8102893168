package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Under the journal each line carries its priority, so `journalctl -p
// warning` finds the warnings; anywhere else lines are as they were.
func TestJournalLinesCarryTheirPriority(t *testing.T) {
	for _, tc := range []struct {
		name, format string
		journal      bool
		want         []string
	}{
		{"journal, console", "console", true, []string{"<7>DEBUG\tzoneproxy\td", "<6>INFO\tzoneproxy\ti", "<4>WARN\tzoneproxy\tw", "<3>ERROR\tzoneproxy\te"}},
		{"journal, json", "json", true, []string{`<7>{"level":"debug"`, `<6>{"level":"info"`, `<4>{"level":"warn"`, `<3>{"level":"error"`}},
		{"another stream", "console", false, []string{"\tDEBUG\tzoneproxy\td"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var st unix.Stat_t
			if err := unix.Fstat(int(f.Fd()), &st); err != nil {
				t.Fatal(err)
			}
			stream := fmt.Sprintf("%d:%d", st.Dev, st.Ino)
			if !tc.journal {
				stream = fmt.Sprintf("%d:%d", st.Dev, st.Ino+1)
			}
			t.Setenv("JOURNAL_STREAM", stream)
			log := newLogger(f, zap.NewAtomicLevelAt(zap.DebugLevel), tc.format)
			log.Debug("d")
			log.Info("i")
			log.Warn("w")
			log.Error("e")
			b, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			for i, want := range tc.want {
				if !strings.HasPrefix(lines[i], want) && !(!tc.journal && strings.Contains(lines[i], want)) {
					t.Errorf("line %d %q, want it to start with %q", i, lines[i], want)
				}
			}
			if !tc.journal && strings.HasPrefix(lines[0], "<") {
				t.Errorf("a priority outside the journal: %q", lines[0])
			}
		})
	}
}

// A message that carries a peer's text (an error from a control plane)
// stays one line: it cannot forge a line, or a priority, in the journal.
func TestALogMessageCannotStartALineOfItsOwn(t *testing.T) {
	for _, format := range []string{"console", "json"} {
		t.Run(format, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			log := newLogger(f, zap.NewAtomicLevelAt(zap.InfoLevel), format)
			log.Warn("bootstrap refused: " + "mesh gone\n<3>ERROR\tzoneproxy\tforged\r\x1b[2J")
			b, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			out := strings.TrimSuffix(string(b), "\n")
			if strings.ContainsAny(out, "\n\r\x1b") {
				t.Errorf("the message broke its line or kept an escape: %q", out)
			}
			if !strings.Contains(out, "forged") {
				t.Errorf("the message lost its text: %q", out)
			}
		})
	}
}
