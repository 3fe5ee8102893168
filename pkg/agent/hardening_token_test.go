package agent

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoneproxy/zoneproxy/pkg/config"
)

// While the agent runs, the relay reads the token file for every new
// stream: a file replaced by a pipe, a device or something larger than a
// token is refused at once without being read (the relay retries, as for
// a rotation), never waited on nor read without end.
func TestReadTokenRefusesWhatIsNoTokenFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", 1<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "token")
	if err := os.WriteFile(good, []byte(" header.payload.sig\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, tok, says string
	}{
		{"a token file", good, "header.payload.sig", ""},
		{"a named pipe", fifo, "", "--dataplane-token-file: cannot read " + fifo + " (is it being rotated?): it is a named pipe (FIFO), not a regular file"},
		{"/dev/zero", "/dev/zero", "", "it is a character device, not a regular file"},
		{"larger than a token", big, "", "more than the 64 KiB a token file may hold"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := testAgent(t, &config.Config{DataplaneTokenFile: tc.path})
			done := make(chan struct{})
			var tok string
			var err error
			go func() {
				defer close(done)
				tok, err = a.token.Read()
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("readToken blocks")
			}
			if tc.says == "" {
				if err != nil || tok != tc.tok || a.token.Last() != tc.tok {
					t.Fatalf("%q %v", tok, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v, want %q", err, tc.says)
			}
		})
	}
}

// The check for a token file Envoy would send untrimmed reads it with the
// same bounds: a pipe put there does not hold the agent up.
func TestUntrimmedTokenCheckNeverBlocks(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	a, logs := testAgent(t, &config.Config{DataplaneTokenFile: fifo})
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.warnIfEnvoyReadsUntrimmedToken(fileCredential)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the check blocks on a named pipe")
	}
	if logs.Len() != 0 {
		t.Errorf("logged %v", logs.All())
	}
}
