//go:build linux

package runner

import (
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/proc"
)

// Tree is the runner's side of a started Cmd: the relay (the runner
// process, the supervisor's child) and the keeper (the relay's child: the
// pid namespace's init, or the inner keeper), which keeps the command's tree.
//
// Nothing here asks those processes for anything, so none of them can stall
// the supervisor: a process stopped by SIGSTOP (without a pid namespace the
// command can signal both) cannot answer, but SIGKILL needs no answer. The
// supervisor reaps the relay itself and continues it at once when it stops
// (the relay does the same for the keeper), and Kill SIGKILLs the tree from
// here, the relay last.
type Tree struct {
	mu        sync.Mutex // held while signalling the relay; reaping takes it
	relay     int
	gone      bool // the relay was reaped: its pid may name another process
	keeper    int  // pidfd of the keeper, or -1
	keeperPid int
	init      bool            // the keeper is the init of a pid namespace
	status    unix.WaitStatus // the relay's, once reaped
	statusErr error
	reaped    chan struct{}
}

// StartTree takes charge of the relay, the supervisor's child pid, not
// reaped yet, from its start on: the command may run (and stop its relay)
// before Start returns.
func StartTree(pid int) *Tree {
	t := &Tree{relay: pid, keeper: -1, reaped: make(chan struct{})}
	go t.reap()
	return t
}

// Reaped is closed once the relay was reaped.
func (t *Tree) Reaped() <-chan struct{} { return t.reaped }

// Status is the relay's wait status, or why it could not be had, once
// Reaped is closed.
func (t *Tree) Status() (unix.WaitStatus, error) { return t.status, t.statusErr }

// SetKeeper records the keeper, pid as the relay reported it (init) or as it
// reported itself (keeper), before the command started. It is the relay's
// child: checked after pidfd_open while the relay is not reaped (so its pid
// is its own), the pidfd names that process. init says it is the init of a
// pid namespace.
func (t *Tree) SetKeeper(pid int, init bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone || t.keeper >= 0 || pid <= 0 {
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	if p, ok := proc.ReadStat(pid); !ok || p.PPID != t.relay {
		unix.Close(fd)
		return
	}
	t.keeper, t.keeperPid, t.init = fd, pid, init
}

// AbandonSetup ends Start's wait for the runner's messages when the relay is
// gone and no message came for a while (the keeper stopped, say): it shuts
// down the control socket (through a duplicate, so that it never touches a
// descriptor Start closed), which Start sees as the runner's exit.
func (t *Tree) AbandonSetup(ctrl *os.File, setupDone <-chan struct{}) {
	fd, err := unix.FcntlInt(ctrl.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return
	}
	go func() {
		defer unix.Close(fd)
		t.abandonWhenLost(fd, setupDone)
	}()
}

func (t *Tree) abandonWhenLost(fd int, setupDone <-chan struct{}) {
	select {
	case <-setupDone:
		return
	case <-t.reaped:
	}
	select {
	case <-setupDone:
	case <-time.After(LostWait):
		unix.Shutdown(fd, unix.SHUT_RDWR)
	}
}

// LostWait bounds the wait for a lost runner's processes to go.
const LostWait = time.Second

// cldStopped is CLD_STOPPED, the si_code of a child stopped by a signal (a
// ptrace stop is reported to the tracer only).
const cldStopped = 5

// reap waits for the relay and reaps it, continuing it whenever it stops.
// The wait does not reap (WNOWAIT); the reaping itself is done under mu, so
// that signal never sends to a pid that may have been reused.
func (t *Tree) reap() {
	defer close(t.reaped)
	for {
		var si unix.Siginfo
		err := unix.Waitid(unix.P_PID, t.relay, &si, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err == nil && si.Code == cldStopped {
			t.Signal(syscall.SIGCONT)
			continue
		}
		t.mu.Lock()
		if err == nil {
			for {
				_, err = unix.Wait4(t.relay, &t.status, unix.WNOHANG, nil)
				if err != unix.EINTR {
					break
				}
			}
		}
		t.statusErr, t.gone = err, true
		t.mu.Unlock()
		return
	}
}

// Signal sends sig to the relay, which forwards it; once the relay is gone,
// straight to the keeper (which forwards it too).
func (t *Tree) Signal(sig syscall.Signal) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.gone {
		return unix.Kill(t.relay, sig)
	}
	if t.keeper >= 0 {
		return unix.PidfdSendSignal(t.keeper, sig, nil, 0)
	}
	return os.ErrProcessDone
}

// Kill SIGKILLs every process of the tree. While the relay lives — stopped
// or not — every process of the command is its descendant: the relay and an
// inner keeper are child subreapers, and a pid namespace's init adopts the
// namespace's orphans. So SIGKILLing the relay's descendants until none is
// left, then the relay, leaves nothing behind, whatever state the keeper is
// in. Once the relay is gone the keeper, if still alive, is the root.
//
// The keeper is asked first (killTreeSignal). A pid namespace's init kills
// the namespace with one kill(-1), which is atomic with respect to fork
// however fast a fork bomb there forks, and reports the command's status.
// An inner keeper kills the command's process group, one call as atomic,
// which only it can make safely (it holds the group's leader unreaped, so
// the group's id names no other group); then, the leader ended, it walks
// what left the group and reports. Kill waits for the keeper's exit, up to
// killRequestWait, before walking itself: a walk of a few hundred processes
// costs CPU they compete for (under autogroup each one in a session of its
// own is a scheduling group of its own), and the walk kills the keeper,
// which would leave a bomb in its group to be won by walks.
//
// An init that has not exited by then is SIGKILLed: the kernel then kills
// the namespace too, but only after the init's own memory is torn down,
// which waits for locks the namespace's forking processes hold in turn.
// Only an init that did not exit at all (a process of its namespace in
// uninterruptible sleep) leaves the walk to do. Without a pid namespace
// the walk always follows, and finds nothing when the keeper did its work.
func (t *Tree) Kill() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.keeper >= 0 && unix.PidfdSendSignal(t.keeper, killTreeSignal(), nil, 0) == nil {
		waitExit([]int{t.keeper}, killRequestWait)
	}
	if t.init && t.keeper >= 0 {
		if proc.Alive(t.keeper) && unix.PidfdSendSignal(t.keeper, unix.SIGKILL, nil, 0) == nil {
			waitExit([]int{t.keeper}, killTreeWait)
		}
		if !proc.Alive(t.keeper) {
			if !t.gone {
				unix.Kill(t.relay, unix.SIGKILL)
			}
			return
		}
	}
	runner := func(pid int) bool { return pid == t.keeperPid }
	switch {
	case !t.gone:
		killSubtree(t.relay, runner, nil)
		unix.Kill(t.relay, unix.SIGKILL)
	case t.keeper >= 0 && proc.Alive(t.keeper):
		killSubtree(t.keeperPid, runner, func() bool { return proc.Alive(t.keeper) })
		unix.PidfdSendSignal(t.keeper, unix.SIGKILL, nil, 0)
	}
}

// killTreeWait bounds Kill's rounds: a process in uninterruptible sleep dies
// only when it wakes (its SIGKILL is pending), and must not hold Kill.
const killTreeWait = 2 * time.Second

// killRequestWait bounds the wait for a keeper asked to kill its tree.
const killRequestWait = time.Second

// killSubtree SIGKILLs the live descendants of root (stopTree, then every
// process it found), round after round, until none is left or killTreeWait
// has passed. runner names the runner's own processes, which are killed
// but never stopped (the relay continues a stopped keeper at once).
// rootAlive, when not nil, must confirm after each scan that root's pid
// still names root.
func killSubtree(root int, runner func(pid int) bool, rootAlive func() bool) {
	deadline := time.Now().Add(killTreeWait)
	for time.Now().Before(deadline) {
		victims := stopTree(root, runner, min(stopTreeWait, time.Until(deadline)))
		if len(victims) == 0 || (rootAlive != nil && !rootAlive()) {
			return
		}
		var fds []int
		for _, p := range victims {
			if fd := signalChecked(p, unix.SIGKILL); fd >= 0 {
				fds = append(fds, fd)
			}
		}
		waitExit(fds, min(100*time.Millisecond, time.Until(deadline)))
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
}

// stopTreeWait bounds one stopTree: a process that does not stop (in
// uninterruptible sleep, a vfork parent waiting for its stopped child, or
// continued by another process of the command) is killed running.
const stopTreeWait = 200 * time.Millisecond

// stopTree SIGSTOPs the live descendants of root, scan after scan, until a
// scan finds every one stopped (or exiting), or d has passed; it returns
// them. Without a pid namespace nothing kills a tree atomically: a process
// that left the command's process group (setsid) is found only by walking
// the tree, and while the walk kills a process its children are being
// reparented (so a scan may miss them) and go on forking. A stopped process
// forks no more and its children stay its own, so once a scan finds the
// whole tree stopped, it has found the whole tree; SIGKILL ends it then.
// runner names processes to walk through but not stop.
func stopTree(root int, runner func(pid int) bool, d time.Duration) []proc.Info {
	deadline := time.Now().Add(d)
	for {
		procs := descendants(root)
		running := 0
		for _, p := range procs {
			if p.State == 'T' || p.State == 't' || (runner != nil && runner(p.PID)) {
				continue
			}
			running++
			if fd := signalChecked(p, unix.SIGSTOP); fd >= 0 {
				unix.Close(fd)
			}
		}
		if running == 0 || !time.Now().Before(deadline) {
			return procs
		}
		time.Sleep(time.Millisecond)
	}
}

// descendants lists the live (not yet exited) descendants of root.
func descendants(root int) []proc.Info {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]proc.Info{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := proc.ReadStat(pid); ok {
			children[p.PPID] = append(children[p.PPID], p)
		}
	}
	var out []proc.Info
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			queue = append(queue, c.PID)
			if c.State != 'Z' && c.State != 'X' {
				out = append(out, c)
			}
		}
	}
	return out
}

// signalChecked sends sig to p through a pidfd, after checking that the pid
// still names p (same parent, same start time), and returns the pidfd (the
// caller closes it), or -1.
func signalChecked(p proc.Info, sig unix.Signal) int {
	fd, err := unix.PidfdOpen(p.PID, 0)
	if err != nil {
		return -1 // gone (ESRCH)
	}
	if q, ok := proc.ReadStat(p.PID); !ok || q.PPID != p.PPID || q.Start != p.Start {
		unix.Close(fd)
		return -1
	}
	unix.PidfdSendSignal(fd, sig, nil, 0)
	return fd
}

// waitExit waits until every pidfd reports its process's exit, or d passed.
func waitExit(fds []int, d time.Duration) {
	deadline := time.Now().Add(d)
	for len(fds) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		pfds := make([]unix.PollFd, len(fds))
		for i, fd := range fds {
			pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		}
		if _, err := unix.Poll(pfds, int(left/time.Millisecond)+1); err != nil && err != unix.EINTR {
			return
		}
		var rest []int
		for i, p := range pfds {
			if p.Revents == 0 {
				rest = append(rest, fds[i])
			}
		}
		fds = rest
	}
}

// Close releases the keeper's pidfd once the Cmd is done.
func (t *Tree) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.keeper >= 0 {
		unix.Close(t.keeper)
		t.keeper = -1
	}
}
