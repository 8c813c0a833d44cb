//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

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

// KillOrphans SIGKILLs and reaps every remaining child of the calling
// process. A supervisor that made itself a child subreaper calls it after
// Wait, so that nothing a command started can outlive it even if the runner
// itself was killed. It must not run concurrently with other waits.
func KillOrphans() { runner.KillDescendants() }

// BecomeSubreaper makes the calling process a child subreaper: orphaned
// descendants are reparented to it instead of to init.
func BecomeSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// CloseOnExecFrom marks every fd >= from close-on-exec, so an fd leaked to
// this process cannot reach the runner or the command.
func CloseOnExecFrom(from int) error { return cloexecFrom(from) }
