package envoy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeEnvoy writes a script that answers --version with build and counts
// its runs in a file beside it.
type fakeEnvoy struct {
	t     *testing.T
	path  string
	count string
}

func newFakeEnvoy(t *testing.T) *fakeEnvoy {
	dir := t.TempDir()
	f := &fakeEnvoy{t: t, path: filepath.Join(dir, "envoy"), count: filepath.Join(dir, "runs")}
	f.install("50ef0945/1.39.0/Clean/RELEASE/BoringSSL")
	return f
}

func (f *fakeEnvoy) script(build string) []byte {
	return []byte("#!/bin/sh\necho run >> '" + f.count + "'\nprintf '\\nenvoy  version: " + build + "\\n\\n'\n")
}

// install replaces the binary with a new file, as a package upgrade does.
func (f *fakeEnvoy) install(build string) {
	tmp := f.path + ".new"
	if err := os.WriteFile(tmp, f.script(build), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		f.t.Fatal(err)
	}
}

// keepingMtime puts the binary's mtime back after change, as tools that
// preserve timestamps do.
func (f *fakeEnvoy) keepingMtime(change func()) {
	fi, err := os.Stat(f.path)
	if err != nil {
		f.t.Fatal(err)
	}
	change()
	chtimes(f.t, f.path, fi.ModTime())
}

func (f *fakeEnvoy) runs() int {
	b, err := os.ReadFile(f.count)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.Count(string(b), "run\n")
}

func TestVersionCacheRunsEnvoyOnlyWhenTheBinaryChanged(t *testing.T) {
	fe := newFakeEnvoy(t)
	stateDir := filepath.Join(t.TempDir(), "state", "zoneproxy") // created on first use
	cacheFile := filepath.Join(stateDir, VersionCacheFile)
	later := time.Now().Add(time.Hour)
	steps := []struct {
		name    string
		change  func()
		runs    int // `--version` runs this start
		version string
	}{
		{"first start runs --version", func() {}, 1, "1.39.0"},
		{"second start reads the cache", func() {}, 0, "1.39.0"},
		{"touched binary runs --version again", func() { chtimes(t, fe.path, later) }, 1, "1.39.0"},
		{"and is cached again", func() {}, 0, "1.39.0"},
		{"an upgraded binary answers its own version", func() { fe.install("abc/1.40.1/Clean/RELEASE/BoringSSL") }, 1, "1.40.1"},
		{"another file of the same size and mtime", func() {
			fe.keepingMtime(func() { fe.install("abc/1.40.2/Clean/RELEASE/BoringSSL") })
		}, 1, "1.40.2"},
		{"rewritten in place, size and mtime kept", func() {
			fe.keepingMtime(func() {
				if err := os.WriteFile(fe.path, fe.script("abc/1.40.3/Clean/RELEASE/BoringSSL"), 0o755); err != nil {
					t.Fatal(err)
				}
			})
		}, 1, "1.40.3"},
		{"corrupt cache file is ignored", func() { writeFile(t, cacheFile, `{"binary":{"dev":`) }, 1, "1.40.3"},
		{"and rewritten", func() {}, 0, "1.40.3"},
		{"a cached build that does not parse is ignored", func() {
			rewriteRecord(t, cacheFile, func(rec *versionRecord) { rec.Build = "nonsense" })
		}, 1, "1.40.3"},
		{"cache of another binary is ignored", func() {
			rewriteRecord(t, cacheFile, func(rec *versionRecord) { rec.Binary.Ino++; rec.Build = "x/9.9.9/a/b/c" })
		}, 1, "1.40.3"},
	}
	for _, s := range steps {
		s.change()
		before := fe.runs()
		got, err := VersionCache{Dir: stateDir}.Read(context.Background(), fe.path)
		if err != nil || got.SaveErr != nil {
			t.Fatalf("%s: %v, save: %v", s.name, err, got.SaveErr)
		}
		if ran := fe.runs() - before; ran != s.runs || got.Cached != (s.runs == 0) {
			t.Errorf("%s: --version ran %d times (cached %v), want %d", s.name, ran, got.Cached, s.runs)
		}
		if got.Version.Version != s.version {
			t.Errorf("%s: version %q, want %q", s.name, got.Version.Version, s.version)
		}
	}
	fi, err := os.Stat(cacheFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %04o, want 0600", cacheFile, fi.Mode().Perm())
	}
	if di, err := os.Stat(stateDir); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("state dir made with mode %v (%v), want 0700", di.Mode().Perm(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(stateDir, versionCacheTemp)); len(left) > 0 {
		t.Errorf("temp files left behind: %v", left)
	}
}

func TestVersionCacheRunsEveryTimeWhenItCannotKeepTheVersion(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	writeFile(t, notADir, "")
	cases := []struct {
		name     string
		dir      string
		build    string
		unparsed bool
		saveErr  bool
	}{
		{"no state dir", "", "50ef/1.39.0/Clean/RELEASE/BoringSSL", false, false},
		{"state dir is a file", notADir, "50ef/1.39.0/Clean/RELEASE/BoringSSL", false, true},
		{"output without a version", t.TempDir(), "garbage", true, false},
	}
	for _, tc := range cases {
		fe := newFakeEnvoy(t)
		fe.install(tc.build)
		for start := 1; start <= 2; start++ {
			got, err := VersionCache{Dir: tc.dir}.Read(context.Background(), fe.path)
			if err != nil || (got.Unread != nil) != tc.unparsed {
				t.Errorf("%s: start %d: error %v, unread %v", tc.name, start, err, got.Unread)
			}
			if tc.unparsed && got.Version.Version != "unknown" {
				t.Errorf("%s: version %q, want unknown", tc.name, got.Version.Version)
			}
			if (got.SaveErr != nil) != tc.saveErr {
				t.Errorf("%s: start %d: save error %v", tc.name, start, got.SaveErr)
			}
			if got.SaveErr != nil && !strings.Contains(got.SaveErr.Error(), "--state-dir") {
				t.Errorf("%s: save error %q does not name --state-dir", tc.name, got.SaveErr)
			}
			if got.Cached || fe.runs() != start {
				t.Errorf("%s: start %d: --version ran %d times in all (cached %v)", tc.name, start, fe.runs(), got.Cached)
			}
		}
	}
}

func TestVersionCacheKeepsReadVersionsErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "envoy")
	_, err := VersionCache{Dir: t.TempDir()}.Read(context.Background(), missing)
	if err == nil || !strings.Contains(err.Error(), "--envoy-binary") {
		t.Fatalf("a binary that cannot run: %v", err)
	}
}

func chtimes(t *testing.T, path string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func rewriteRecord(t *testing.T, path string, change func(*versionRecord)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec versionRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	change(&rec)
	out, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(out))
}

// ReadOnly takes a recorded version but never writes one, nor creates the
// state dir: check may run as another user than the service.
func TestVersionCacheReadOnlyNeverWrites(t *testing.T) {
	f := newFakeEnvoy(t)
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "state")
	got, err := VersionCache{Dir: missing, ReadOnly: true}.Read(ctx, f.path)
	if err != nil || got.Cached || got.Version.Version != "1.39.0" || f.runs() != 1 {
		t.Fatalf("first read: %+v, %v, %d runs; want 1.39.0 from one run", got, err, f.runs())
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a read-only read created the state dir (%v)", err)
	}
	dir := t.TempDir()
	if _, err := (VersionCache{Dir: dir}).Read(ctx, f.path); err != nil {
		t.Fatal(err)
	}
	got, err = VersionCache{Dir: dir, ReadOnly: true}.Read(ctx, f.path)
	if err != nil || !got.Cached || got.Version.Version != "1.39.0" || f.runs() != 2 {
		t.Fatalf("read of a recorded version: %+v, %v, %d runs; want it cached, 2 runs in all", got, err, f.runs())
	}
}

// Correct records what the running Envoy reported for the binary as it is
// now, so the next Read takes it without running --version; a build that
// is not a version, or a read-only cache, records nothing.
func TestVersionCacheCorrectRecordsTheRunningBuild(t *testing.T) {
	const running = "0123456789abcdef/1.40.1/Clean/RELEASE/BoringSSL"
	for _, tc := range []struct {
		name     string
		cache    func(dir string) VersionCache
		build    string
		wantErr  bool
		wantRead string // the build the next Read gives
	}{
		{"recorded", func(dir string) VersionCache { return VersionCache{Dir: dir} }, running, false, running},
		{"not a version", func(dir string) VersionCache { return VersionCache{Dir: dir} }, "garbage", true, "50ef0945/1.39.0/Clean/RELEASE/BoringSSL"},
		{"read-only", func(dir string) VersionCache { return VersionCache{Dir: dir, ReadOnly: true} }, running, false, "50ef0945/1.39.0/Clean/RELEASE/BoringSSL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := newFakeEnvoy(t)
			dir := t.TempDir()
			if _, err := (VersionCache{Dir: dir}).Read(context.Background(), fe.path); err != nil {
				t.Fatal(err)
			}
			if err := tc.cache(dir).Correct(fe.path, tc.build); (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrNotABuild)) {
				t.Fatalf("Correct: %v; want ErrNotABuild: %v", err, tc.wantErr)
			}
			found, err := VersionCache{Dir: dir}.Read(context.Background(), fe.path)
			if err != nil || !found.Cached || found.Version.Build != tc.wantRead {
				t.Fatalf("next Read: %+v, %v; want %s from the cache", found, err, tc.wantRead)
			}
			if fe.runs() != 1 {
				t.Fatalf("--version ran %d times; want once, before Correct", fe.runs())
			}
		})
	}
}
