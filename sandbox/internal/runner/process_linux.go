//go:build linux

package runner

import (
	"errors"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// KillDescendants SIGKILLs every descendant of a child subreaper (orphans
// are reparented to it, so every process it started, however deep, stays
// its descendant) and reaps its children, until none is left. Each round
// stops the whole tree it finds (stopTree), not just the direct children,
// then SIGKILLs it: a stopped process forks no more, so a fork bomb cannot
// outgrow the rounds. The pids are checked against their parent and start
// time (signalChecked). A round that finds nothing it had not killed before
// waits a little for a child to exit, and looks again.
func KillDescendants() {
	// The common case first: no child left alive (the runner reaped its
	// tree and was reaped, or left only zombies: an inner keeper killed
	// with its group is reparented here), so there is nothing to walk
	// /proc for. A zombie's children were reparented before it became
	// one, so once the zombies are reaped and none is left, no descendant
	// is. A live child needs the walk, and so do more zombies than the
	// runner's processes: a tree still busy (a bomb's orphans dying here)
	// could feed this loop for as long as it runs, which only the walk's
	// stops end.
	for reaped := 0; ; {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if errors.Is(err, unix.ECHILD) {
			return
		}
		if err == nil && pid > 0 && reaped < fastReaps {
			reaped++
			continue
		}
		break
	}
	self := os.Getpid()
	killed := map[[2]uint64]bool{}
	for {
		fresh := 0
		for _, p := range stopTree(self, nil, stopTreeWait) {
			if fd := signalChecked(p, unix.SIGKILL); fd >= 0 {
				unix.Close(fd)
				if k := [2]uint64{uint64(p.PID), p.Start}; !killed[k] {
					killed[k] = true
					fresh++
				}
			}
		}
		reaped := false
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err == unix.EINTR {
				continue
			}
			if errors.Is(err, unix.ECHILD) {
				return
			}
			if pid <= 0 || err != nil {
				break
			}
			reaped = true
		}
		if fresh == 0 && !reaped {
			// Everything found is dying: give it a moment. (Not a blocking
			// wait: a scan is not exact while the tree changes, and a
			// process it missed would hold that wait for ever.)
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// fastReaps bounds the zombies KillDescendants reaps before it walks: the
// runner's own processes (relay, keeper) and a few more.
const fastReaps = 8

// KillSession SIGKILLs every process of session sid until none is left. A
// session id stays allocated while any member lives, so it cannot name an
// unrelated process.
func KillSession(sid int) {
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
