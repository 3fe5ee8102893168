package lkgcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/host/securedir"
	"github.com/zoneproxy/zoneproxy/pkg/xds/cpdial"
)

// DefaultMaxAge matches the control plane's cleanup of offline Dataplanes
// (runtime.universal.dataplaneCleanupAge).
const DefaultMaxAge = 72 * time.Hour

// SubDir (of the state dir) holds the cache file, FileName.
const (
	SubDir   = "xds"
	FileName = "xds-lkg"
)

const tempPattern = ".xds-lkg-*.tmp"

// writeSettle is how long the writer lets further updates arrive before it
// writes; a crash inside it loses only that moment's changes.
const writeSettle = 200 * time.Millisecond

// writeRetry paces the writes of a snapshot the disk refused.
const writeRetry = 10 * time.Second

// Options configures Open and OpenIn.
type Options struct {
	Dir      string // the state dir's path, for Open; the cache goes in its SubDir, 0700
	Identity Identity
	MaxAge   time.Duration // 0 means DefaultMaxAge
	Now      func() time.Time
	Log      *zap.Logger
}

// Cache holds the current last-known-good snapshot in memory and writes it
// behind to disk: Store never waits for the disk, and only the latest
// state is written.
type Cache struct {
	opts Options
	sub  *securedir.Dir // the state dir's SubDir, held open until the writer stops
	dir  string         // sub, named through its descriptor
	path string         // the cache file's path, for messages
	log  *zap.Logger

	mu        sync.Mutex
	current   *Snapshot // what Usable judges; nil if none
	bootstrap []byte
	upstream  cpdial.Target
	pending   *Snapshot // not written yet
	failing   bool      // the last write failed (logged once per episode)
	// source and sourceAt: the last Update, not read into a snapshot yet.
	source    func() []TypeState
	sourceAt  time.Time
	refreshMu sync.Mutex // one refresh at a time: an older state never replaces a newer

	wake       chan struct{}
	flushes    chan chan bool // Flush's requests, answered by the writer
	stop       chan struct{}
	stopped    chan struct{}
	closeMu    sync.Once
	writeOut   func(dir string, s *Snapshot) error // tests slow it down
	retryEvery time.Duration                       // after a failed write
}

// Open opens the state dir at opts.Dir as pkg/host/securedir trusts it
// (this user's, nobody else's to change, up to /) and opens the cache in
// it, as OpenIn.
func Open(opts Options) (*Cache, error) {
	if opts.Dir == "" {
		return nil, errors.New("lkgcache: no state dir")
	}
	d, err := securedir.Open(opts.Dir, config.KeyStateDir.Flag(), true)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return OpenIn(d, opts)
}

// OpenIn loads the cache in stateDir, which the caller opened (and the
// agent locked) already, if it is intact and made for opts.Identity, and
// starts the writer; opts.Dir is not read. The caller may close stateDir
// once OpenIn returns. A damaged cache is removed with a warning; one of
// another identity is left alone and not used.
func OpenIn(stateDir *securedir.Dir, opts Options) (*Cache, error) {
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	// SubDir is made 0700: the cache holds the proxy's TLS keys, and what
	// it holds is served to Envoy. The state dir itself is the operator's
	// and keeps its mode.
	sub, err := stateDir.Sub(SubDir, config.KeyStateDir.Flag(), true, true)
	if err != nil {
		return nil, err
	}
	c := &Cache{
		opts: opts, sub: sub, dir: sub.At(""), path: sub.Join(FileName), log: opts.Log,
		wake: make(chan struct{}, 1), flushes: make(chan chan bool), stop: make(chan struct{}), stopped: make(chan struct{}),
		writeOut: writeAtomic, retryEvery: writeRetry,
	}
	removeTemps(sub)
	c.current = c.load()
	if c.current != nil {
		// Kept in every later snapshot: a start from this cache fetches no
		// bootstrap, so nothing else would set them.
		c.bootstrap, c.upstream = c.current.Bootstrap, c.current.Upstream
	}
	go c.writer()
	return c, nil
}

func removeTemps(d *securedir.Dir) {
	matches, _ := filepath.Glob(filepath.Join(d.At(""), tempPattern))
	for _, m := range matches {
		_ = d.Remove(filepath.Base(m))
	}
}

func (c *Cache) load() *Snapshot {
	data, err := c.readFile()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		c.log.Warn("cannot read the xDS cache; starting without it", zap.String("path", c.path), zap.Error(err))
		return nil
	}
	s, err := decodeBounded(data)
	if err != nil {
		c.log.Warn("discarding a damaged xDS cache", zap.String("path", c.path), zap.Error(err))
		_ = c.sub.Remove(FileName)
		return nil
	}
	if s.Identity != c.opts.Identity {
		c.log.Warn("the xDS cache was made for another proxy or control plane; not using it",
			zap.String("path", c.path), zap.Any("cached", s.Identity), zap.Any("want", c.opts.Identity))
		return nil
	}
	return s
}

// readFile reads the cache file, never through a link.
func (c *Cache) readFile() ([]byte, error) {
	f, err := c.sub.OpenFile(FileName, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// One byte past the bound tells a file over it, without reading it all.
	return io.ReadAll(io.LimitReader(f, int64(maxFileBytes)+1))
}

// maxFileBytes bounds the cache file read: a few responses of the relay's
// bound (32 MiB each) at most. A larger file is damaged, not loaded.
var maxFileBytes = 128 << 20

func decodeBounded(data []byte) (*Snapshot, error) {
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("the file is larger than %d MiB, more than any configuration the relay accepts", maxFileBytes>>20)
	}
	return Decode(data)
}

// SetBootstrap is the rewritten (tokenless) bootstrap Envoy runs with and
// how the relay reaches the control plane, stored with every later
// snapshot.
func (c *Cache) SetBootstrap(bootstrap []byte, upstream cpdial.Target) {
	c.mu.Lock()
	c.bootstrap, c.upstream = bootstrap, upstream
	c.mu.Unlock()
}

// ReplaceBootstrap is SetBootstrap once Envoy was replaced by one started
// on bootstrap (an Envoy handover): the configuration held now is kept
// with it at once, and written, so that a start or a reload that reads
// the cache before the next update finds the bootstrap Envoy runs with.
func (c *Cache) ReplaceBootstrap(bootstrap []byte, upstream cpdial.Target) {
	c.mu.Lock()
	c.bootstrap, c.upstream = bootstrap, upstream
	cur := c.current
	if cur != nil {
		s := *cur
		s.Bootstrap, s.Upstream = bootstrap, upstream
		c.current, c.pending = &s, &s
	}
	c.mu.Unlock()
	if cur != nil {
		c.wakeWriter()
	}
}

// Store records Envoy's configuration as of now and schedules its write.
// It takes ownership of types.
func (c *Cache) Store(types []TypeState) {
	c.refreshMu.Lock()
	c.mu.Lock()
	c.source = nil // older than types
	c.install(c.opts.Now(), types)
	c.mu.Unlock()
	c.refreshMu.Unlock()
	c.wakeWriter()
}

// Update records that Envoy's configuration changed now; state is read
// (and owned by the cache) only when a snapshot is next needed: by the
// writer once updates settle, or by Usable. A burst of updates, one per
// ACK, costs one read of the state, off the caller's path. state must be
// safe to call from any goroutine.
func (c *Cache) Update(state func() []TypeState) {
	c.mu.Lock()
	c.source, c.sourceAt = state, c.opts.Now()
	c.mu.Unlock()
	c.wakeWriter()
}

// refresh makes the last Update's state the current snapshot.
func (c *Cache) refresh() {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	c.mu.Lock()
	state, at := c.source, c.sourceAt
	c.source = nil
	c.mu.Unlock()
	if state == nil {
		return
	}
	types := state()
	c.mu.Lock()
	c.install(at, types)
	c.mu.Unlock()
}

// install makes types, as of at, the current snapshot, to be written.
// c.mu is held.
func (c *Cache) install(at time.Time, types []TypeState) {
	s := &Snapshot{Identity: c.opts.Identity, WrittenAt: at, Bootstrap: c.bootstrap, Upstream: c.upstream, Types: types}
	s.normalize()
	c.current = s
	c.pending = s
}

func (c *Cache) wakeWriter() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Usable returns the snapshot Envoy may be served now, or why none is.
func (c *Cache) Usable() (*Snapshot, error) {
	c.refresh()
	c.mu.Lock()
	s := c.current
	c.mu.Unlock()
	if s == nil {
		return nil, errors.New("no cached configuration for this proxy")
	}
	return s, Judge(s, c.opts.Now(), c.opts.MaxAge)
}

// EarliestNotAfter is the first certificate expiry in the current
// snapshot; the zero time without one, or when it cannot be read.
func (c *Cache) EarliestNotAfter() time.Time {
	c.mu.Lock()
	s := c.current
	c.mu.Unlock()
	if s == nil {
		return time.Time{}
	}
	na, _ := s.EarliestNotAfter()
	return na
}

// Judge says why s must not be served at now, nil if it may.
func Judge(s *Snapshot, now time.Time, maxAge time.Duration) error {
	age := s.Age(now)
	switch {
	case age < -time.Minute:
		return fmt.Errorf("the cached configuration is dated %s, in the future (was the clock changed?)", s.WrittenAt.UTC().Format(time.RFC3339))
	case age > maxAge:
		// No age in the text: it is the reason the agent logs once, and
		// says again only when it changes.
		return fmt.Errorf("the cached configuration is older than %s %s (it was written at %s)", config.KeyCacheMaxAge.Flag(), maxAge, s.WrittenAt.UTC().Format(time.RFC3339))
	}
	na, err := s.EarliestNotAfter()
	if err != nil {
		return fmt.Errorf("the cached configuration has an unreadable certificate: %w", err)
	}
	if !na.IsZero() && !now.Before(na) {
		return fmt.Errorf("a certificate in the cached configuration expired at %s", na.UTC().Format(time.RFC3339))
	}
	return nil
}

// Close writes what is pending (bounded by ctx) and stops the writer.
func (c *Cache) Close(ctx context.Context) error {
	c.closeMu.Do(func() { close(c.stop) })
	select {
	case <-c.stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the xDS cache write did not finish: %w", ctx.Err())
	}
}

// Flush writes what is pending now, bounded by ctx, and leaves the writer
// running: the agent flushes before it replaces itself in place, and goes
// on as before if that fails.
func (c *Cache) Flush(ctx context.Context) error {
	done := make(chan bool, 1)
	select {
	case c.flushes <- done:
	case <-c.stopped:
		return errors.New("the xDS cache is closed")
	case <-ctx.Done():
		return fmt.Errorf("the xDS cache write did not start: %w", ctx.Err())
	}
	select {
	case ok := <-done:
		if !ok {
			return fmt.Errorf("cannot write the xDS cache %s", c.path)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the xDS cache write did not finish: %w", ctx.Err())
	}
}

func (c *Cache) writer() {
	defer close(c.stopped)
	defer c.sub.Close()
	var retry <-chan time.Time
	for {
		var flushed chan bool // a Flush waits for this write
		select {
		case <-c.wake:
			// Let a burst of ACKs (a snapshot arriving type by type) settle
			// into one write: latest wins, and the disk is not re-written
			// for every response. A Flush does not wait for it.
			t := time.NewTimer(writeSettle)
			select {
			case <-t.C:
			case flushed = <-c.flushes:
				t.Stop()
			case <-c.stop:
				t.Stop()
				c.writePending()
				return
			}
		case <-retry:
		case flushed = <-c.flushes:
		case <-c.stop:
			c.writePending()
			return
		}
		retry = nil
		ok := c.writePending()
		if flushed != nil {
			flushed <- ok
		}
		if !ok {
			// A full or failing disk may recover while the configuration
			// stays the same for hours: try again without waiting for a
			// change.
			retry = time.After(c.retryEvery)
		}
	}
}

// writePending writes the latest snapshot, if one is pending; false when
// the write failed, and the snapshot stays pending.
func (c *Cache) writePending() bool {
	c.refresh()
	c.mu.Lock()
	s := c.pending
	c.pending = nil
	c.mu.Unlock()
	if s == nil {
		return true
	}
	err := c.writeOut(c.dir, s)
	c.mu.Lock()
	wasFailing := c.failing
	c.failing = err != nil
	if err != nil && c.pending == nil {
		c.pending = s
	}
	c.mu.Unlock()
	switch {
	case err != nil && !wasFailing:
		c.log.Warn("cannot write the xDS cache; a restart while the control plane is unreachable would find an older one", zap.String("path", c.path), zap.Error(err))
	case err == nil && wasFailing:
		c.log.Info("the xDS cache is written again", zap.String("path", c.path))
	}
	return err == nil
}

// writeAtomic replaces the cache file: temp file, fsync, rename, fsync of
// the directory, so a crash leaves the old file or the new one.
func writeAtomic(dir string, s *Snapshot) error {
	f, err := os.CreateTemp(dir, tempPattern) // 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err = encodeTo(f, s); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, FileName))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Holds says whether the last configuration kept (loaded or stored since)
// has a resource of typeURL named name.
func (c *Cache) Holds(typeURL, name string) bool {
	c.mu.Lock()
	s := c.current
	c.mu.Unlock()
	return s.Holds(typeURL, name)
}
