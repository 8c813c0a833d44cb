//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
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

// childrenOf lists the direct children of this process (all threads).
func childrenOf() []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// killDescendants SIGKILLs every descendant of a child subreaper (orphans are
// reparented to it, so repeatedly killing and reaping its children reaches
// the whole tree) until none is left.
func killDescendants() {
	for i := 0; i < 10000; i++ {
		kids := childrenOf()
		for _, k := range kids {
			unix.Kill(k, unix.SIGKILL)
		}
		reaped := false
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err == unix.EINTR {
				continue
			}
			if pid <= 0 || err != nil {
				if errors.Is(err, unix.ECHILD) && len(kids) == 0 {
					return
				}
				break
			}
			reaped = true
		}
		if len(kids) == 0 && !reaped {
			// Children may be mid-exit; block for one.
			var ws unix.WaitStatus
			if _, err := unix.Wait4(-1, &ws, 0, nil); errors.Is(err, unix.ECHILD) {
				return
			}
		}
	}
}

// KillOrphans SIGKILLs and reaps every remaining child of the calling
// process. A supervisor that made itself a child subreaper calls it after
// Wait, so that nothing a command started can outlive it even if the runner
// itself was killed. It must not run concurrently with other waits.
func KillOrphans() { killDescendants() }

// BecomeSubreaper makes the calling process a child subreaper: orphaned
// descendants are reparented to it instead of to init.
func BecomeSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// CloseOnExecFrom marks every fd >= from close-on-exec, so an fd leaked to
// this process cannot reach the runner or the command.
func CloseOnExecFrom(from int) error { return cloexecFrom(from) }

// killSession SIGKILLs every process of session sid until none is left. A
// session id stays allocated while any member lives, so it cannot name an
// unrelated process.
func killSession(sid int) {
	if sid <= 1 {
		return
	}
	for round := 0; round < 100; round++ {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		found := false
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if s, err := unix.Getsid(pid); err == nil && s == sid {
				unix.Kill(pid, unix.SIGKILL)
				found = true
			}
		}
		if !found {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
