package xds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/zoneproxy/zoneproxy/pkg/config"
	"github.com/zoneproxy/zoneproxy/pkg/exitcode"
	"github.com/zoneproxy/zoneproxy/pkg/host/securedir"
	"github.com/zoneproxy/zoneproxy/pkg/xds/lkgcache"
)

// CacheFlushTimeout bounds a write of the last-known-good cache when the
// agent stops or replaces itself: a disk that hangs must not hold it up.
const CacheFlushTimeout = 5 * time.Second

// Cache is the last-known-good configuration the relay keeps, held by the
// agent across Envoy's restarts. A nil *Cache is none: every method is a
// no-op.
type Cache struct{ c *lkgcache.Cache }

// Cached is a configuration from the cache that Envoy may start on.
type Cached struct {
	snap *lkgcache.Snapshot
	// WrittenAt is when the control plane last confirmed it.
	WrittenAt time.Time
}

// CacheIdentity is whom a last-known-good cache is for: `run` keeps it and
// `check` reports on it under the same key.
func CacheIdentity(cfg *config.Config) lkgcache.Identity {
	return lkgcache.Identity{Mesh: cfg.Mesh, Name: cfg.Name, Role: string(cfg.Role), ControlPlane: cfg.CPAddress}
}

// OpenCache opens the cache of cfg's identity in the state dir the agent
// holds; nil when the relay or the state dir is off. A cache directory
// another user could change is the configuration's to fix (78); one that
// cannot be opened otherwise is a warning: the proxy runs without a cache.
func OpenCache(stateDir *securedir.Dir, cfg *config.Config, log *zap.Logger) (*Cache, error) {
	if !cfg.XDSRelay || stateDir == nil {
		return nil, nil
	}
	c, err := lkgcache.OpenIn(stateDir, lkgcache.Options{
		Identity: CacheIdentity(cfg), MaxAge: cfg.CacheMaxAge, Log: log.Named("cache"),
	})
	if errors.Is(err, securedir.ErrUntrusted) {
		return nil, exitcode.AsConfig(err)
	}
	if err != nil {
		log.Warn("cannot keep a last-known-good configuration; running without one", zap.String(string(config.KeyStateDir), cfg.StateDir), zap.Error(err))
		return nil, nil
	}
	return &Cache{c: c}, nil
}

// InspectCache reads the cache `run` would keep for cfg, changing nothing.
func InspectCache(cfg *config.Config, now time.Time) lkgcache.Status {
	return lkgcache.Inspect(cfg.StateDir, CacheIdentity(cfg), cfg.CacheMaxAge, now)
}

// Servable is the cached configuration if Envoy may be started on it with
// the relay on socketPath, or why not. The cached bootstrap holds work-dir
// paths (the relay and admin sockets, the FIFO), so a cache made in
// another work dir (a temporary one, say) is not served.
func (c *Cache) Servable(socketPath string) (*Cached, error) {
	if c == nil {
		return nil, errors.New("no last-known-good configuration is kept")
	}
	snap, err := c.c.Usable()
	if err == nil && !bytes.Contains(snap.Bootstrap, []byte(socketPath)) {
		err = fmt.Errorf("it was made in another work dir than %s (give the zone proxy a fixed %s)", filepath.Dir(socketPath), config.KeyWorkDir.Flag())
	}
	if err != nil {
		return nil, err
	}
	return &Cached{snap: snap, WrittenAt: snap.WrittenAt}, nil
}

// EarliestNotAfter is the first certificate expiry in the cache; zero if
// none.
func (c *Cache) EarliestNotAfter() time.Time {
	if c == nil {
		return time.Time{}
	}
	return c.c.EarliestNotAfter()
}

// KeepBootstrap makes bootstrap, relayed as r says, the one a start from
// the cache runs Envoy on (after a handover to a new bootstrap).
func (c *Cache) KeepBootstrap(bootstrap []byte, r *Resumption) {
	if c != nil && r != nil {
		c.c.ReplaceBootstrap(bootstrap, r.Upstream)
	}
}

// Flush writes what is pending, bounded, and keeps the cache open.
func (c *Cache) Flush() error {
	if c == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), CacheFlushTimeout)
	defer cancel()
	return c.c.Flush(ctx)
}

// Close writes what is pending, bounded, and stops the cache's writer.
func (c *Cache) Close() {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), CacheFlushTimeout)
	defer cancel()
	_ = c.c.Close(ctx)
}

// lkg is the cache for the relay, nil if none.
func (c *Cache) lkg() *lkgcache.Cache {
	if c == nil {
		return nil
	}
	return c.c
}
