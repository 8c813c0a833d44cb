package sandbox

import "github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/cachestore"

// CacheUsage returns the disk space that what confined commands added to
// the toolchain caches takes in store (modes.Policy.CacheStore), in bytes.
func CacheUsage(store string) (int64, error) { return cachestore.Usage(store) }

// CleanCaches empties store: the upper layer of every toolchain cache that
// no running command holds; busy counts those left. The user's own caches
// are not touched (they never held what commands added).
func CleanCaches(store string) (busy int, err error) { return cachestore.Clean(store) }
