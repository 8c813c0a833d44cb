//go:build linux

package supervisor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/changes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/mountplan"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/resolve"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// Notifier answers the seccomp user notifications of one sandbox. It never
// widens what the kernel layers allow: it pre-denies what the policy forbids
// (recording a fact) and lets everything else continue to the kernel, except
// connect, sendto, sendmsg and sendmmsg, which it performs itself after
// checking the destination, so the target cannot swap it after the check.
type Notifier struct {
	fd     int
	rootMu sync.Mutex
	rootfd int // the sandbox's root, opened from the first notifying process
	table  map[int32]seccomp.Rule
	policy modes.Policy
	facts  *facts.Log
	// changes records the paths of the write-like calls let through
	// (nil: none are recorded).
	changes *changes.Tracker
	conns   sync.WaitGroup
	done    chan struct{}
	// stopR/stopW wake run to end it early: closing the listener makes
	// every pending and later notified call fail (ENOSYS), still denied.
	stopMu       sync.Mutex
	stopR, stopW int // -1 once closed
	hostPts      hostDevpts
	// ruleset is the command's Landlock ruleset (-1: none), for the
	// restricted thread.
	ruleset int
	// restricted performs binds and metadata changes as the command would
	// (restricted_linux.go).
	restricted restrictedThread
	// idMaps are the sandbox's uid and gid maps, read once (metadata_linux.go).
	idMaps [2]idMap
	// relay and relayStart name the runner, whose descendants are the
	// sandbox's processes (sched_linux.go).
	relay      int
	relayStart uint64
	keeper     int        // the runner's inner keeper, 0 with a pid namespace (SetKeeper)
	own        ownSockets // socket files the sandbox bound
	lost       lostBinds  // binds whose answer a signal lost (restart_linux.go)
	// firstCall and firstErr: Config.FirstCall, and what it returned
	// (gate); mayChange: see MayHaveChanged.
	firstCall func() error
	firstOnce sync.Once
	firstErr  error
	mayChange atomic.Bool
	// beforeAnswer, when set (by tests), runs before each answer.
	beforeAnswer func(req *seccomp.Notif)
	guard        OpenGuard // what Landlock cannot stop in this run
	egress       *Egress   // inet destinations under an allowlist, or nil
	// nocopy: this host refuses pidfd_getfd, so sockets are replaced, not
	// copied (replace_linux.go).
	nocopy bool
	// ipc, when not nil, are the IPC objects the sandbox made: it has no
	// IPC namespace of its own (ipc_linux.go).
	ipc *ipcObjects
	// loop is the Target the notification loop reuses for path calls
	// (loopTarget); only Run's goroutine touches it.
	loop resolve.Target
}

// OpenGuard is what the notifier refuses, from a call's registers alone,
// because no mount view backs Landlock in this run (the runner says so with
// the listener). Landlock requires no right for an open with access mode 3
// (its file_open hook looks only at FMODE_READ and FMODE_WRITE), and before
// ABI 3 none for truncation: truncate(2), or an open with O_TRUNC whose
// access mode is not writable, which Linux honours when DAC allows
// writing. A continued call could be raced (the command may change the path
// after it was read), so these are refused everywhere, workspace included,
// never judged by path; openat2 keeps its flags in memory, so it answers
// ENOSYS and callers fall back to openat. With a mount view every mount
// outside the roots is read-only and nodev, and nothing changes.
//
// The same holds for changes of metadata (mode, owner, times, extended
// attributes, inode flags), for which Landlock has no right at all: without
// a mount view the notifier performs them itself (metadata_linux.go), on
// the files the policy lets the command change, and refuses the rest.
type OpenGuard struct {
	ioctlOpen bool // refuse open/openat with access mode 3
	truncate  bool // refuse truncate(2) and O_TRUNC opens that are not writable
	openat2   bool // answer openat2 with ENOSYS
	metadata  bool // emulate metadata changes (KindMeta) rather than continue them
}

// OpenGuardFor returns the guard of a run with or without the mount view,
// under Landlock ABI abi (0: none).
func OpenGuardFor(mountView bool, abi int) OpenGuard {
	if mountView {
		// openat2 keeps its flags and mode in memory: with a view too, a
		// mode with set-ID bits could not be seen race-free (setid.go).
		return OpenGuard{openat2: true}
	}
	return OpenGuard{ioctlOpen: true, truncate: abi < 3, openat2: true, metadata: true}
}

// refuses returns the errno the guard answers call name with arguments a,
// or 0. It reads only the registers (a snapshot): nothing the command can
// change afterwards. Flags are an int: only the low 32 bits count.
func (g OpenGuard) refuses(name string, a [6]uint64) unix.Errno {
	switch name {
	case "openat2":
		if g.openat2 {
			return unix.ENOSYS
		}
	case "truncate":
		if g.truncate {
			return unix.EACCES
		}
	case "open", "openat":
		flags := uint32(a[1])
		if name == "openat" {
			flags = uint32(a[2])
		}
		acc := flags & unix.O_ACCMODE
		if g.ioctlOpen && acc == seccomp.AccModeIoctl {
			return unix.EACCES
		}
		if g.truncate && flags&unix.O_TRUNC != 0 && acc != unix.O_WRONLY && acc != unix.O_RDWR {
			return unix.EACCES
		}
	}
	return 0
}

// guardVerdict answers what the guard refuses; ok is false for the rest.
// The fact names the path as read from the command's memory (the decision
// does not depend on it); openat2's ENOSYS is a fallback, not a denial, and
// has none.
func (n *Notifier) guardVerdict(req *seccomp.Notif, rule seccomp.Rule) (v verdict, ok bool) {
	errno := n.guard.refuses(rule.Name, req.Args)
	if errno == 0 {
		return verdict{}, false
	}
	if errno == unix.ENOSYS {
		return verdict{errno: errno}, true
	}
	a := req.Args
	dirfd, addr, follow := int32(unix.AT_FDCWD), a[0], true
	switch rule.Name {
	case "open":
		follow = a[1]&unix.O_NOFOLLOW == 0
	case "openat":
		dirfd, addr, follow = int32(a[0]), a[1], a[2]&unix.O_NOFOLLOW == 0
	}
	return n.deny(rule, errno, n.factPath(req, dirfd, addr, follow), ""), true
}

// factPath names a path argument for a denial fact: canonical when it can
// be resolved, else as the command wrote it ("" when unreadable).
func (n *Notifier) factPath(req *seccomp.Notif, dirfd int32, addr uint64, follow bool) string {
	t, rootErr := n.loopTarget(req)
	p, err := t.ReadPath(addr)
	if err != nil {
		return ""
	}
	if rootErr != nil {
		return p
	}
	if r, err := t.Resolve(dirfd, p, follow); err == nil {
		return r
	}
	return p
}

// Config is what a Notifier judges by.
type Config struct {
	// Spec is the filter the listener belongs to.
	Spec seccomp.Spec
	// Policy is the sandbox's policy.
	Policy modes.Policy
	// Denials records what is refused.
	Denials *facts.Log
	// Changes, when not nil, records the paths of the write-like calls let
	// through.
	Changes *changes.Tracker
	// Relay is the runner's process, whose descendants are the sandbox's.
	Relay int
	// Ruleset is the command's Landlock ruleset, or nil; the notifier keeps
	// a duplicate.
	Ruleset *os.File
	// Guard is what the notifier refuses outright (see OpenGuardFor).
	Guard OpenGuard
	// FirstCall, when not nil, runs once, before the first call that may
	// change a file (see writesFiles) is let through or performed: the
	// audit's start walk, run beside the command, which must see the
	// writable roots as they were before the command changed anything —
	// and every change a confined command makes there is such a call. An
	// error fails that call and every later one with EIO, each with a
	// fact: nothing changes unaudited.
	FirstCall func() error
}

// NewNotifier serves listener fd of a filter built from c.Spec. It owns fd
// from the call on: an error closes it.
func NewNotifier(fd int, c Config) (_ *Notifier, err error) {
	rs := -1
	defer func() {
		if err != nil {
			unix.Close(fd)
			if rs >= 0 {
				unix.Close(rs)
			}
		}
	}()
	table, err := seccomp.Table(c.Spec)
	if err != nil {
		return nil, err
	}
	if c.Ruleset != nil {
		if rs, err = unix.FcntlInt(c.Ruleset.Fd(), unix.F_DUPFD_CLOEXEC, 0); err != nil {
			return nil, fmt.Errorf("notifier: %w", err)
		}
	}
	start, err := procStart(c.Relay)
	if err != nil {
		return nil, fmt.Errorf("notifier: read the runner's start time: %w", err)
	}
	var stop [2]int
	if err := unix.Pipe2(stop[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, fmt.Errorf("notifier: %w", err)
	}
	return &Notifier{fd: fd, rootfd: -1, table: table, policy: c.Policy, facts: c.Denials, changes: c.Changes, done: make(chan struct{}),
		stopR: stop[0], stopW: stop[1], ruleset: rs, restricted: restrictedThread{ruleset: rs}, relay: c.Relay, relayStart: start, guard: c.Guard,
		firstCall: c.FirstCall}, nil
}

// stopped reports whether stop was called.
func (n *Notifier) stopped() bool {
	fds := []unix.PollFd{{Fd: int32(n.stopR), Events: unix.POLLIN}}
	k, _ := unix.Poll(fds, 0)
	return k > 0
}

// stop ends run even while processes still use the filter.
func (n *Notifier) stop() {
	n.stopMu.Lock()
	defer n.stopMu.Unlock()
	if n.stopW >= 0 {
		unix.Write(n.stopW, []byte{0})
	}
}

// Run serves notifications until every process holding the filter is gone.
func (n *Notifier) Run() {
	defer close(n.done)
	defer unix.Close(n.fd)
	defer func() {
		n.restricted.stop()
		if n.rootfd >= 0 {
			unix.Close(n.rootfd)
		}
		if n.ruleset >= 0 {
			unix.Close(n.ruleset)
		}
	}()
	defer func() {
		n.stopMu.Lock()
		unix.Close(n.stopR)
		unix.Close(n.stopW)
		n.stopR, n.stopW = -1, -1
		n.stopMu.Unlock()
	}()
	seccomp.SetSyncWakeup(n.fd)
	fds := []unix.PollFd{{Fd: int32(n.fd), Events: unix.POLLIN}, {Fd: int32(n.stopR), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			break
		}
		if fds[1].Revents != 0 {
			break // stopped
		}
		if fds[0].Revents&unix.POLLIN == 0 {
			break // POLLHUP: no task uses the filter any more
		}
		req := new(seccomp.Notif)
		if err := seccomp.Receive(n.fd, req); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // the target died before we read its notification
			}
			break
		}
		if k := n.table[req.Nr].Kind; writesFiles(k) && k != seccomp.KindPath && n.gate() != nil {
			// (What the supervisor may perform waits here; a path call,
			// only to be let through: respond.)
			n.respond(req, n.unaudited(req))
			continue
		}
		n.handle(req)
	}
	n.conns.Wait()
}

// MayHaveChanged reports whether a notified call may have changed a file
// (see writesFiles): one let through to the kernel (whatever path the
// supervisor read, which a racing thread can change before the kernel reads
// it) or performed by the supervisor. Calls refused before the kernel saw
// them change nothing. Once Run ended, false means no process of the
// sandbox changed anything in the writable roots (see Config.FirstCall).
func (n *Notifier) MayHaveChanged() bool { return n.mayChange.Load() }

// gate runs Config.FirstCall once, and returns its error.
func (n *Notifier) gate() error {
	n.firstOnce.Do(func() {
		if n.firstCall != nil {
			n.firstErr = n.firstCall()
		}
	})
	return n.firstErr
}

// unaudited fails a call because Config.FirstCall failed.
func (n *Notifier) unaudited(req *seccomp.Notif) verdict {
	name := n.table[req.Nr].Name
	if name == "" {
		name = strconv.Itoa(int(req.Nr))
	}
	return verdict{errno: unix.EIO, fact: &facts.Denial{Op: "git-control", Syscall: name, Errno: "EIO",
		Reason: "the audit could not read the writable roots before this call: " + n.firstErr.Error()}}
}

// Finish waits for Run to end once the sandbox's processes are gone, and
// stops it after d: a process that still uses the filter then (one that
// escaped the tree) gets ENOSYS for every notified call — still denied.
func (n *Notifier) Finish(d time.Duration) {
	select {
	case <-n.done:
	case <-time.After(d):
		n.stop()
		<-n.done
	}
}

// verdict is the answer to one notification.
type verdict struct {
	cont  bool       // let the kernel run the call (its layers still apply)
	errno unix.Errno // else fail with this errno (0: succeed with val)
	val   uint64
	fact  *facts.Denial
	// abandon: give no answer (the call was abandoned, see bounded_linux.go)
	abandon bool
	// lost, for a bind performed, is remembered should the answer be lost
	// (restart_linux.go).
	lost *lostBind
}

func allow() verdict { return verdict{cont: true} }

func (n *Notifier) deny(rule seccomp.Rule, errno unix.Errno, path, addr string) verdict {
	return verdict{errno: errno, fact: &facts.Denial{Op: rule.Op, Path: path, Address: addr, Syscall: rule.Name, Errno: errnoName(errno)}}
}

// respond answers a notification and records its fact. If the process died
// before the answer (its pid may since have been reused, so what we read may
// have come from another process), the answer fails and the fact is dropped
// with it.
func (n *Notifier) respond(req *seccomp.Notif, v verdict) {
	if n.beforeAnswer != nil {
		n.beforeAnswer(req)
	}
	if writesFiles(n.table[req.Nr].Kind) && !v.abandon {
		if v.cont && n.gate() != nil {
			v = n.unaudited(req)
		}
		if v.cont || v.errno == 0 {
			n.mayChange.Store(true)
		}
	}
	var err error
	switch {
	case v.abandon:
		return
	case v.cont:
		err = seccomp.Continue(n.fd, req.ID)
	case v.errno != 0:
		err = seccomp.Fail(n.fd, req.ID, v.errno)
	default:
		err = seccomp.Return(n.fd, req.ID, int64(v.val))
	}
	if err == nil && v.fact != nil {
		n.facts.Add(*v.fact)
	}
	if errors.Is(err, unix.ENOENT) && v.lost != nil {
		n.lost.add(*v.lost)
	}
}

// writesFiles reports whether a call of kind k, let through or performed,
// may change a file: a path call, a change of metadata, a bind (a socket
// file). Socket calls reach only the sandbox's own sockets and the egress
// proxy, IPC objects and signals are no files, and a denied call did
// nothing.
func writesFiles(k seccomp.Kind) bool {
	return k == seccomp.KindPath || k == seccomp.KindMeta || k == seccomp.KindBind
}

func (n *Notifier) handle(req *seccomp.Notif) {
	rule, ok := n.table[req.Nr]
	if !ok {
		n.respond(req, verdict{errno: unix.ENOSYS})
		return
	}
	a := req.Args
	switch rule.Kind {
	case seccomp.KindDeny:
		if rule.Name == "ioctl" && seccomp.MetaIoctl(a[1]) {
			n.respond(req, n.metaIoctl(req, rule))
			return
		}
		addr := ""
		if rule.Name == "ioctl" {
			addr = ioctlName(a[1])
		}
		n.respond(req, n.deny(rule, rule.Errno, "", addr))
	case seccomp.KindSocket:
		n.respond(req, n.deny(rule, rule.Errno, "", familyName(a[0])))
	case seccomp.KindConnect, seccomp.KindSendto, seccomp.KindSendmsg:
		// These may have to wait (a full listen backlog or socket buffer):
		// answer from a goroutine so other notifications keep flowing. The
		// wait is bounded (bounded_linux.go), so Run's n.conns.Wait is too.
		n.conns.Add(1)
		go func() {
			defer n.conns.Done()
			var v verdict
			switch {
			case rule.Kind == seccomp.KindConnect:
				v = n.connect(req, rule)
			case rule.Kind == seccomp.KindSendto:
				v = n.sendto(req, rule)
			case rule.Name == "sendmmsg":
				v = n.sendmmsg(req, rule)
			default:
				v = n.sendmsg(req, rule)
			}
			n.respond(req, v)
		}()
	case seccomp.KindPath:
		if v, ok := n.guardVerdict(req, rule); ok {
			n.respond(req, v)
			return
		}
		if v, ok := n.setIDCreate(req, rule); ok {
			n.respond(req, v)
			return
		}
		n.respond(req, n.pathVerdict(req, rule))
	case seccomp.KindMeta:
		n.respond(req, n.metaVerdict(req, rule))
	case seccomp.KindIPC:
		n.respond(req, n.ipcVerdict(req, rule))
	case seccomp.KindBind:
		n.respond(req, n.bind(req, rule))
	case seccomp.KindListen:
		n.respond(req, n.listen(req, rule))
	case seccomp.KindSockname:
		n.respond(req, n.sockname(req))
	case seccomp.KindSched:
		n.respond(req, n.schedVerdict(req, rule))
	case seccomp.KindSignal:
		n.respond(req, n.signalVerdict(req, rule))
	}
}

// pathArg is one path argument of a notified call.
type pathArg struct {
	dirfd  int32
	addr   uint64
	entry  bool // the call acts on the directory entry, not what it points to
	follow bool // for non-entries: follow a final symlink
}

// pathVerdict judges a write-like filesystem call against the policy.
func (n *Notifier) pathVerdict(req *seccomp.Notif, rule seccomp.Rule) verdict {
	a := req.Args
	cwd := int32(unix.AT_FDCWD)
	var args []pathArg
	var flags uint64 // of the open family
	errno := rule.Errno
	switch rule.Name {
	case "open", "openat", "openat2", "creat":
		var dirfd int32 = cwd
		var addr uint64
		addr, flags = a[0], a[1]
		switch rule.Name {
		case "openat":
			dirfd, addr, flags = int32(a[0]), a[1], a[2]
		case "openat2":
			dirfd, addr = int32(a[0]), a[1]
			b, err := resolve.ReadBytes(int(req.Pid), a[2], 8)
			if err != nil {
				return allow()
			}
			flags = binary.LittleEndian.Uint64(b)
		case "creat":
			flags = unix.O_CREAT | unix.O_WRONLY | unix.O_TRUNC
		}
		if flags&unix.O_PATH != 0 || (flags&unix.O_ACCMODE == unix.O_RDONLY && flags&(unix.O_CREAT|unix.O_TRUNC) == 0) {
			return allow()
		}
		if rule.Name != "openat2" && flags&unix.O_ACCMODE == seccomp.AccModeIoctl && flags&(unix.O_CREAT|unix.O_TRUNC) == 0 {
			// Routed only for the guard: here the command has the mount
			// view (its read-only, nodev mounts decide, as they did before
			// these opens were routed).
			return allow()
		}
		follow := flags&unix.O_NOFOLLOW == 0 && flags&(unix.O_CREAT|unix.O_EXCL) != unix.O_CREAT|unix.O_EXCL
		args = []pathArg{{dirfd: dirfd, addr: addr, follow: follow}}
	case "truncate":
		args = []pathArg{{dirfd: cwd, addr: a[0], follow: true}}
	case "mkdir", "mknod", "unlink", "rmdir":
		args = []pathArg{{dirfd: cwd, addr: a[0], entry: true}}
	case "mkdirat", "mknodat", "unlinkat":
		args = []pathArg{{dirfd: int32(a[0]), addr: a[1], entry: true}}
	case "symlink":
		args = []pathArg{{dirfd: cwd, addr: a[1], entry: true}}
	case "symlinkat":
		args = []pathArg{{dirfd: int32(a[1]), addr: a[2], entry: true}}
	case "rename":
		args = []pathArg{{dirfd: cwd, addr: a[0], entry: true}, {dirfd: cwd, addr: a[1], entry: true}}
	case "renameat", "renameat2":
		args = []pathArg{{dirfd: int32(a[0]), addr: a[1], entry: true}, {dirfd: int32(a[2]), addr: a[3], entry: true}}
	case "link":
		args = []pathArg{{dirfd: cwd, addr: a[0]}, {dirfd: cwd, addr: a[1], entry: true}}
	case "linkat":
		args = []pathArg{{dirfd: int32(a[0]), addr: a[1], follow: a[4]&unix.AT_SYMLINK_FOLLOW != 0}, {dirfd: int32(a[2]), addr: a[3], entry: true}}
	default:
		return allow()
	}

	t, err := n.loopTarget(req)
	if err != nil {
		return allow()
	}
	resolved := make([]string, len(args))
	for i, pa := range args {
		p, err := t.ReadPath(pa.addr)
		if err != nil {
			return allow() // the kernel reports EFAULT/ENAMETOOLONG itself
		}
		if pa.entry {
			resolved[i], err = t.ResolveEntry(pa.dirfd, p)
		} else {
			resolved[i], err = t.Resolve(pa.dirfd, p, pa.follow)
		}
		if err != nil {
			return allow() // missing parents, magic links: the kernel decides
		}
		if modes.Within(resolved[i], "/proc") {
			if mountplan.ProcGlobal(resolved[i]) {
				// sysctls, sysrq-trigger, irq affinities: the kernel's
				// global state (the mount view binds them read-only).
				return n.deny(rule, unix.EROFS, resolved[i], "")
			}
			return allow() // the command's own /proc/PID files
		}
	}
	if rule.Op == "link" {
		// link(old, new): the new name must be writable, and the old file
		// must be too, or the link would grant write access to it.
		if !n.policy.Writable(resolved[1]) {
			return n.refuse(t.RootFD, rule, resolved[1], "", flags)
		}
		if !n.policy.Writable(resolved[0]) {
			return n.deny(rule, unix.EXDEV, resolved[0], "")
		}
		n.changes.Touch(t.RootFD, resolved[1])
		return allow()
	}
	for _, p := range resolved {
		if !n.policy.Writable(p) {
			return n.refuse(t.RootFD, rule, p, resolved[0], flags)
		}
		if n.otherTerminal(t, p) {
			return n.deny(rule, errno, p, "")
		}
		if flags != 0 && p == "/dev/tty" && noTerminal(t, req) {
			// Bash opens it at every start: the kernel's answer, without
			// letting the call through (see MayHaveChanged).
			return verdict{errno: unix.ENXIO}
		}
		// Removing or renaming an ancestor of a protected path would let
		// a command rebuild it elsewhere (the mount view pins these); so
		// would renaming over one, or exchanging one (RENAME_EXCHANGE):
		// both names of a rename are checked.
		if (rule.Op == "remove" || rule.Op == "rename") && n.pinsProtected(p) {
			if rule.Op == "remove" {
				if errno := failsAnyway(t.RootFD, p, rule.Name, a); errno != 0 {
					// git stash and git checkout try rmdir(".git"): the
					// kernel's answer, nothing denied (and nothing
					// continued).
					return verdict{errno: errno}
				}
			}
			return n.deny(rule, unix.EBUSY, p, "")
		}
	}
	// Recorded before the kernel runs the call: the state the path had.
	if rule.Op == "rename" && !(rule.Name == "renameat2" && a[4]&unix.RENAME_EXCHANGE != 0) {
		n.changes.Rename(t.RootFD, resolved[0], resolved[1])
		return allow()
	}
	for _, p := range resolved {
		n.changes.Touch(t.RootFD, p)
	}
	return allow()
}

// refuse answers a write-like call on p, a path the policy does not let the
// command write: outside the writable roots as a read-only mount would
// (readOnlyAnswer: EROFS is a denial, the rest are not), inside them (a
// protected path) with the rule's errno and a fact. src: see readOnlyAnswer.
func (n *Notifier) refuse(rootfd int, rule seccomp.Rule, p, src string, flags uint64) verdict {
	if !outsideRoots(n.policy, p) {
		return n.deny(rule, rule.Errno, p, "")
	}
	errno, denial, cont := readOnlyAnswer(rootfd, rule.Name, p, src, flags)
	switch {
	case cont:
		return allow()
	case denial:
		return n.deny(rule, errno, p, "")
	}
	return verdict{errno: errno}
}

// chmodVerdict lets a change of mode through, recording its path as a
// change first: with the mount view (every path outside the writable roots
// and every protected one on a read-only mount) it is routed for the change
// facts only.
func (n *Notifier) chmodVerdict(req *seccomp.Notif, rule seccomp.Rule) verdict {
	a := req.Args
	dirfd, addr, follow := int32(unix.AT_FDCWD), a[0], true
	switch rule.Name {
	case "fchmodat":
		dirfd, addr = int32(a[0]), a[1]
	case "fchmodat2":
		dirfd, addr, follow = int32(a[0]), a[1], a[3]&unix.AT_SYMLINK_NOFOLLOW == 0
	}
	if n.changes == nil {
		return allow()
	}
	t, err := n.loopTarget(req)
	if err != nil {
		return allow()
	}
	p, err := t.ReadPath(addr)
	if err != nil || p == "" {
		return allow() // AT_EMPTY_PATH: the file of a descriptor, not named
	}
	if r, err := t.Resolve(dirfd, p, follow); err == nil {
		n.changes.Touch(t.RootFD, r)
	}
	return allow()
}

// failsAnyway returns the errno the kernel gives a removal (unlink,
// unlinkat, rmdir: name, with arguments a) of directory p, which holds a
// protected path, when it fails whatever the policy: EISDIR for an unlink,
// ENOTEMPTY for an rmdir of a directory with entries; 0 when it would not
// (it is then denied). p is read through the sandbox's root without
// following a symlink; the answer is given, never the call continued, so
// the directory changing afterwards changes nothing.
func failsAnyway(rootfd int, p, name string, a [6]uint64) unix.Errno {
	dir := true
	switch name {
	case "unlink":
		dir = false
	case "unlinkat":
		dir = a[2]&unix.AT_REMOVEDIR != 0
	}
	fd, err := unix.Openat2(rootfd, resolve.Rel(p), &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	if !dir {
		return unix.EISDIR
	}
	buf := make([]byte, 1024)
	for {
		k, err := unix.Getdents(fd, buf)
		if err != nil || k <= 0 {
			return 0 // empty (or unreadable): rmdir would succeed
		}
		if _, count, _ := unix.ParseDirent(buf[:k], 1, nil); count > 0 {
			return unix.ENOTEMPTY // ParseDirent skips . and ..
		}
	}
}

func (n *Notifier) pinsProtected(p string) bool {
	for _, pp := range n.policy.Protected {
		if pp != p && modes.Within(pp, p) {
			return true
		}
	}
	return false
}

func errnoName(e unix.Errno) string {
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return fmt.Sprintf("errno %d", int(e))
}

var families = map[uint64]string{
	unix.AF_INET: "AF_INET", unix.AF_INET6: "AF_INET6", unix.AF_NETLINK: "AF_NETLINK",
	unix.AF_PACKET: "AF_PACKET", unix.AF_VSOCK: "AF_VSOCK", unix.AF_BLUETOOTH: "AF_BLUETOOTH",
	unix.AF_ALG: "AF_ALG", unix.AF_CAN: "AF_CAN", unix.AF_TIPC: "AF_TIPC", unix.AF_XDP: "AF_XDP",
	unix.AF_KEY: "AF_KEY", unix.AF_RDS: "AF_RDS", unix.AF_UNSPEC: "AF_UNSPEC", unix.AF_UNIX: "AF_UNIX",
}

// familyName names a socket domain as the kernel reads it: an int, so only
// the low 32 bits count.
func familyName(domain uint64) string {
	d := uint64(uint32(domain))
	if n, ok := families[d]; ok {
		return n
	}
	return fmt.Sprintf("AF_%d", d)
}

func ioctlName(req uint64) string {
	if name := seccomp.DeniedIoctlName(req); name != "" {
		return name
	}
	return fmt.Sprintf("%#x", req)
}

// abstractName renders an abstract unix socket name as "@name".
func abstractName(b []byte) string {
	return "@" + strings.TrimRight(string(b), "\x00")
}

// loopTarget is target for the notification loop's own goroutine (path
// calls): it reuses one Target and its buffers instead of allocating them.
// The Target is returned even when the root cannot be opened (the error
// says so): its memory can still be read, but nothing resolved.
func (n *Notifier) loopTarget(req *seccomp.Notif) (*resolve.Target, error) {
	rootfd, err := n.root(req)
	n.loop.Retarget(int(req.Pid))
	n.loop.RootFD = rootfd
	return &n.loop, err
}

// target returns the process of a notification. The sandbox's root is opened
// once, from a process whose notification is still pending (so the pid was
// not reused).
func (n *Notifier) target(req *seccomp.Notif) (*resolve.Target, error) {
	rootfd, err := n.root(req)
	if err != nil {
		return nil, err
	}
	return &resolve.Target{PID: int(req.Pid), RootFD: rootfd}, nil
}

// root returns the sandbox's root directory, opened from the first
// notifying process.
func (n *Notifier) root(req *seccomp.Notif) (int, error) {
	n.rootMu.Lock()
	defer n.rootMu.Unlock()
	if n.rootfd < 0 {
		fd, err := resolve.OpenRoot(int(req.Pid))
		if err != nil {
			return -1, err
		}
		if !seccomp.Valid(n.fd, req.ID) {
			unix.Close(fd)
			return -1, unix.ESRCH
		}
		n.rootfd = fd
	}
	return n.rootfd, nil
}
