package envoy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/zoneproxy/zoneproxy/pkg/config/key"
	"github.com/zoneproxy/zoneproxy/pkg/errtext"
)

// VersionCacheFile, in the state dir, keeps the parsed `envoy --version`:
// running Envoy's large binary only to print a line costs tens of
// milliseconds at every start.
const VersionCacheFile = "envoy-version.json"

const versionCacheTemp = ".envoy-version-*.tmp"

// VersionCache reads Envoy's version through VersionCacheFile in Dir.
// An empty Dir runs `--version` every time. ReadOnly never writes the
// record (nor creates Dir): for a command that may run as another user.
type VersionCache struct {
	Dir      string
	ReadOnly bool
}

// FoundVersion is what VersionCache.Read learnt.
type FoundVersion struct {
	Version Version
	Cached  bool  // read from the cache: `--version` did not run
	Unread  error // Envoy ran but its answer was not understood: Version is "unknown"
	SaveErr error // the version could not be cached; it is still good
}

// binaryID names one file's content on disk: a replaced, rewritten or
// touched binary changes at least one of these. ctime cannot be set back
// by tools that preserve mtime.
type binaryID struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
	CtimeNs int64  `json:"ctime_ns"`
}

type versionRecord struct {
	Binary binaryID `json:"binary"`
	Build  string   `json:"build"` // as `--version` printed it; Version is parsed from it
}

// Read returns the version of the Envoy binary at path: from the cache
// when it was recorded for this very file, else by running `--version`
// and recording the answer. The error is ReadVersion's when Envoy cannot
// run; an answer it cannot parse is FoundVersion.Unread.
func (c VersionCache) Read(ctx context.Context, path string) (FoundVersion, error) {
	id, statErr := statBinary(path)
	cacheFile := filepath.Join(c.Dir, VersionCacheFile)
	if c.Dir != "" && statErr == nil {
		if v, ok := readVersionRecord(cacheFile, id); ok {
			return FoundVersion{Version: v, Cached: true}, nil
		}
	}
	v, err := ReadVersion(ctx, path)
	found := FoundVersion{Version: v}
	var unparsed *UnparsedVersionError
	if errors.As(err, &unparsed) {
		found.Unread = err // not worth keeping: --version runs again next time
		return found, nil
	}
	if err != nil || c.Dir == "" || c.ReadOnly || statErr != nil {
		return found, err
	}
	// Keyed by the file as it was before the run: one replaced meanwhile
	// has another id, so its answer is never taken for the new file's.
	found.SaveErr = writeVersionRecord(c.Dir, versionRecord{Binary: id, Build: v.Build})
	return found, nil
}

// ErrNotABuild is Correct's answer to a build string that names no version.
var ErrNotABuild = errors.New("not an Envoy build string")

// Correct records build as the version of the binary at path: what the
// running Envoy reported, when the cache (keyed on a wrapper script, say)
// kept an older answer. A build that does not parse is refused with
// ErrNotABuild, whether or not the cache would record it.
func (c VersionCache) Correct(path, build string) error {
	if _, ok := parseBuild(build); !ok {
		return fmt.Errorf("%w: %q", ErrNotABuild, errtext.Truncate(build, 200))
	}
	if c.Dir == "" || c.ReadOnly {
		return nil
	}
	id, err := statBinary(path)
	if err != nil {
		return err
	}
	return writeVersionRecord(c.Dir, versionRecord{Binary: id, Build: build})
}

func statBinary(path string) (binaryID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return binaryID{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return binaryID{}, errors.New("no inode data")
	}
	return binaryID{
		Dev: st.Dev, Ino: st.Ino, Size: st.Size,
		MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano(),
	}, nil
}

// readVersionRecord is the cached version of the binary id; a missing,
// corrupt or stale record is a miss, and the next write replaces it.
func readVersionRecord(file string, id binaryID) (Version, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Version{}, false
	}
	var rec versionRecord
	if json.Unmarshal(data, &rec) != nil || rec.Binary != id {
		return Version{}, false
	}
	return parseBuild(rec.Build)
}

// parseBuild reads a bare build string, as `envoy --version` prints it
// after "version: "; the whole string must be the build.
func parseBuild(build string) (Version, bool) {
	v, err := ParseVersion("version: " + build)
	return v, err == nil && v.Build == build
}

// writeVersionRecord replaces the record atomically (temp file, rename).
// No fsync: it is on a first start's way to Envoy, and a record a crash
// left empty or torn reads as a miss, so `--version` runs again.
func writeVersionRecord(dir string, rec versionRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s: %w", key.StateDir.Flag(), err)
	}
	stale, _ := filepath.Glob(filepath.Join(dir, versionCacheTemp))
	for _, s := range stale {
		_ = os.Remove(s)
	}
	f, err := os.CreateTemp(dir, versionCacheTemp) // 0600
	if err != nil {
		return fmt.Errorf("%s: %w", key.StateDir.Flag(), err)
	}
	tmp := f.Name()
	_, err = f.Write(append(data, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, VersionCacheFile))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("%s: %w", key.StateDir.Flag(), err)
	}
	return nil
}
