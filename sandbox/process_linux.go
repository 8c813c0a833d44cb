//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/cachestore"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/runner"
)

// cloexecFrom marks every fd >= from close-on-exec, so only 0, 1 and 2 (and
// fds the caller explicitly passes) survive the next execve.
func cloexecFrom(from int) error {
	err := unix.CloseRange(uint(from), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Kernels before 5.11: walk /proc/self/fd.
	ents, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("close_range: %w; /proc/self/fd: %w", err, rerr)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < from {
			continue
		}
		unix.CloseOnExec(fd)
	}
	return nil
}

// Attach readies a process whose one job is to run a Cmd (a CLI): every fd
// above 2 becomes close-on-exec, so that nothing leaked to the process
// reaches the command, and the process becomes a child subreaper, so that
// what the command leaves behind comes back to it. Call reap after Wait: it
// SIGKILLs and reaps every remaining child of the process, so that nothing
// the command started outlives it even if the runner itself was killed. It
// must not run concurrently with other waits.
func Attach() (reap func(), err error) {
	if err := cloexecFrom(3); err != nil {
		return nil, err
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("set child subreaper: %w", err)
	}
	return runner.KillDescendants, nil
}

// CacheUsage returns the disk space that what confined commands added to
// the toolchain caches takes in store (modes.Policy.CacheDir), in bytes.
func CacheUsage(store string) (int64, error) { return cachestore.Usage(store) }

// CleanCaches empties store: the upper layer of every toolchain cache that
// no running command holds; busy counts those left. The user's own caches
// are not touched (they never held what commands added).
func CleanCaches(store string) (busy int, err error) { return cachestore.Clean(store) }
