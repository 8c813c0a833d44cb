//go:build linux

package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/internal/signame"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/audit"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/cachestore"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/changes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/limits"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/runner"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/supervisor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/landlock"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/transaction"
)

// AuditCache is what the post-run audit read of the writable roots'
// directories, kept for the next commands (Cmd.AuditCache). The zero value
// is ready to use.
//
// With Watch set before its first use, it also asks the kernel (inotify) to
// report every change of the directories it read, so that a command's audit
// neither lists nor stats a directory that reported none: its cost follows
// what changed, not the workspace's size. The watches come out of the
// user's inotify budget (at most a quarter of fs.inotify.max_user_watches;
// the directories beyond are checked by their change time) and are held
// until Close.
type AuditCache struct {
	Watch bool
	c     audit.Cache
}

func (a *AuditCache) cache() *audit.Cache {
	if a == nil {
		return nil
	}
	a.c.SetWatch(a.Watch)
	return &a.c
}

// Close releases the cache's watches. The cache stays usable, without
// them.
func (a *AuditCache) Close() error {
	return a.c.Close()
}

// WriteRecords writes what the cache's walks read of each directory that
// its change time vouches for, for ReadRecords in a later process: a
// program that lives for one command (dsh-sandbox-run) keeps them between
// its commands, so that a command's first walk stats an unchanged
// directory instead of listing it. It reports whether a walk listed a
// directory since the records were read; when none did, the records are
// those read.
//
// Whoever can write the records can hide a directory's change from the
// audit: keep them where no confined command can write (the sandbox's state
// directory, hidden from every confined command).
func (a *AuditCache) WriteRecords(w io.Writer) (changed bool, err error) {
	return a.c.WriteRecords(w)
}

// RecordsChanged reports whether a walk listed a directory since the
// records were read: whether WriteRecords would write other records than
// those read. It costs nothing; WriteRecords serializes every record.
func (a *AuditCache) RecordsChanged() bool { return a.c.RecordsChanged() }

// ReadRecords replaces the cache's records by those WriteRecords wrote,
// read whole from r. Records it cannot take (another format, a damaged
// file) leave the cache as it was.
func (a *AuditCache) ReadRecords(r io.Reader) error {
	return a.c.ReadRecords(r)
}

// LoadRecords is ReadRecords in the background, for a caller that does not
// need its error: the cache's next use waits for it. A program that lives
// for one command (dsh-sandbox-run) starts it before the command, whose
// start walk runs beside the command's start (see Cmd.Start).
func (a *AuditCache) LoadRecords(r io.Reader) { a.c.LoadRecords(r) }

// RulesetCache keeps the Landlock rulesets' derivations (their rules), for
// the next commands of the same policy (Cmd.Rulesets), each of which still
// builds a ruleset of its own. A kept derivation is used again only while
// what it was derived from holds: the existence of each deny-read path,
// the identity of each path it has a rule on, the identity and change time
// of each directory it listed, and the mount table; anything else makes it
// be derived anew. Each kept derivation holds a descriptor until Close. The
// zero value is ready to use.
type RulesetCache struct {
	c landlock.Cache
}

func (rc *RulesetCache) cache() *landlock.Cache {
	if rc == nil {
		return nil
	}
	return &rc.c
}

// Close releases the kept derivations. The cache stays usable.
func (rc *RulesetCache) Close() error { return rc.c.Close() }

// cmdState is what a started Cmd keeps (Linux).
type cmdState struct {
	proc    *os.Process
	tree    *runner.Tree // the runner's processes
	nsError string
	prep    *preparation
	// prepared delivers prepareCommand's error: the command is prepared
	// beside its runner's start, from before the runner is spawned
	// (awaitPrepared).
	prepared       chan error
	prepErr        error
	ctrl           *os.File
	facts          *facts.Log
	notifier       *supervisor.Notifier
	changed        *changes.Tracker // nil without a supervisor
	changes        []Change         // settled once the command's processes are gone
	changesDropped map[string]int   // by writable root
	// txHold holds Transaction (see transaction.Tx.Hold); the runner's
	// processes inherit its files, past the fds of ExtraFiles.
	txHold *transaction.Hold
	// caches holds the entries of the toolchain caches the command mounts
	// (cachestore.Open) until its processes are gone.
	caches *cachestore.Store
	audits []*audit.Audit // the git control and protected entries at the start
	// startWalk, when not nil, is the walk that finds audits, run beside
	// the command's start (see startWalk).
	startWalk *startWalk
	group     *limits.Group // the command's cgroup (resource limits), or nil
	usage     *Usage
	noAudit   bool // the probe's `true` changes nothing: no audit
	enf       Enforcement
	egress    *egressSession // the command's use of the egress proxy, or nil
	// resolvConf is the resolv.conf whose nameservers the stub resolver
	// answers at ("": /etc/resolv.conf; tests change it).
	resolvConf string
	ownProxy   bool // Proxy was made for this command
	done       chan struct{}
	exited     chan struct{} // closed once the command's status is known, or the runner is gone
	exitedOnce sync.Once
	exit       *runner.Msg
	lost       error
	pidNS      bool // the command runs in the runner's pid namespace
	cmdPid     int  // the command's pid as the runner sees it
	killMu     sync.Mutex
	killed     bool // Kill was called
	waitOnce   sync.Once
	result     *Result
	waitErr    error
}

// Start sets up the sandbox and starts the command. It returns once the
// command runs confined, with a *SetupError when the sandbox could not be
// set up (an inconsistent Policy, see modes.Policy.Validate, included), or
// with an *ExecError when the command could not be executed (in both cases
// the command never ran).
func (c *Cmd) Start() (err error) {
	if c.proc != nil {
		return errors.New("sandbox: already started")
	}
	if len(c.Args) == 0 || c.Args[0] == "" {
		return &SetupError{Detail: "no command given"}
	}
	if err := c.Policy.Validate(); err != nil {
		// A hand-built policy must say what is enforced: refuse it.
		return &SetupError{Detail: err.Error(), Err: err}
	}
	for i, f := range c.ExtraFiles {
		if f == nil {
			return &SetupError{Detail: fmt.Sprintf("ExtraFiles[%d] is nil", i)}
		}
	}
	runnerPath := c.Runner
	if runnerPath == "" {
		// This very binary, even if its file was replaced or removed
		// since it started.
		runnerPath = selfExe
	}
	if c.LandlockABI < 0 {
		return &SetupError{Detail: fmt.Sprintf("LandlockABI must not be negative, got %d", c.LandlockABI)}
	}
	// The one rollback: whatever Start made for the command is gone when
	// the command does not run.
	defer func() {
		if err == nil {
			return
		}
		c.awaitPrepared()
		if c.group != nil {
			c.group.Close()
			c.group = nil
		}
		if c.txHold != nil {
			c.txHold.Close()
		}
		if c.startWalk != nil {
			c.startWalk.abandon()
		}
		c.caches.Close()
		c.closeProxy()
	}()
	var ports []uint16
	if c.Policy.Allowlist != nil && c.Policy.Mode.Confines() {
		if c.Proxy == nil {
			c.Proxy, c.ownProxy = NewEgressProxy(), true
		}
		addr, err := c.Proxy.address()
		if err != nil {
			return &SetupError{Detail: err.Error(), Err: err}
		}
		ports = append(ports, addr.Port())
		for _, h := range c.Policy.Allowlist.Hosts {
			ports = append(ports, h.Port())
		}
	}
	if c.Transaction != nil {
		if err := transactionFits(c.Policy, c.Transaction); err != nil {
			return setupFailed("prepare the sandbox", err)
		}
		// Held until the command's processes (and so its overlay) are
		// gone: no commit moves the upper layer under it (the hold's
		// descriptors go to the runner).
		if c.txHold, err = c.Transaction.Hold(); err != nil {
			return &SetupError{Detail: err.Error(), Err: err}
		}
	}
	// The command is prepared (the policy's ruleset and programs, the
	// caches' layers, the audit's start, the mount plan) beside the
	// runner's start, which needs none of it until its spec.
	c.prepared = make(chan error, 1)
	go func() { c.prepared <- c.prepareCommand(ports) }()
	defer func() {
		c.awaitPrepared()
		if c.prep != nil {
			c.prep.close()
		}
	}()
	if c.Policy.Limits.Any() {
		// Limits that cannot be enforced never fail a command: without a
		// group the runner sets RLIMIT_NPROC where it counts per command,
		// and Enforcement.Missing says what is not enforced.
		c.group, _ = limits.Create(c.Policy.Limits, "dsh-sandbox-"+groupNonce())
	}
	err = c.startRunner(runnerPath, true, ports)
	if errors.Is(err, errNprocInSession) {
		// Without its group now, the command is no session's.
		err = c.startRunner(runnerPath, true, ports)
	}
	var se *SetupError
	if errors.As(err, &se) && strings.HasPrefix(se.Detail, "userns-map:") {
		// The host let the runner create a user namespace but not map its
		// ids into it: start a fresh runner without namespaces.
		c.nsError = "user namespaces unusable (" + se.Detail + ")"
		err = c.startRunner(runnerPath, false, ports)
	}
	if errors.As(err, &se) && c.Transaction != nil && strings.HasPrefix(se.Detail, transactionUnavailable) {
		se.Err = ErrTransactionUnavailable
	}
	return err
}

// prepareCommand is what Start does for the command while its runner
// starts, in a goroutine of its own: the policy's preparation (Landlock
// ruleset, seccomp programs), the toolchain caches' layers, the mount plan
// and the audit's start. The runner only waits for its spec meanwhile;
// everything here must be done before the spec is sent, so before the
// command can change anything. It must not touch what Start's goroutine
// does meanwhile (the cgroup, the runner, the proxy).
func (c *Cmd) prepareCommand(ports []uint16) (err error) {
	// The toolchain caches' overlays (not for the probe's `true`, which
	// writes nothing and must not make cache directories).
	var layers []cachestore.Layer
	if c.Policy.Mode == modes.WorkspaceWrite && len(c.Policy.Caches) > 0 && !c.noAudit {
		if c.caches, layers, err = cachestore.Open(c.Policy); err != nil {
			return setupFailed("open the cache store", err)
		}
	}
	if c.prep, err = prepare(c.Policy, c.LandlockABI, ports, c.Transaction, layers, c.Rulesets.cache()); err != nil {
		return setupFailed("prepare the sandbox", err)
	}
	c.prep.addCaches(layers)
	if c.Policy.Mode.Confines() {
		// For the first runner, which makes its namespaces (an error
		// counts only for one that needs the plan: see spec).
		c.prep.makePlan(len(c.ExtraFiles))
	}
	switch {
	case c.noAudit:
		c.audits = nil
	case c.Transaction != nil:
		// The command writes to the workspace only through the overlay:
		// its upper layer is what to audit.
		c.audits, err = audit.StartOver(c.Policy, c.AuditSkip, c.Policy.Workspace, c.Transaction.UpperDir(), c.AuditCache.cache())
	case c.walksBeside() && freeFDs() >= walkBesideFDs:
		if err = audit.CheckRoots(c.Policy); err == nil {
			c.startWalk = c.beginStartWalk()
		}
	default:
		c.audits, err = audit.Start(c.Policy, c.AuditSkip, c.AuditCache.cache())
	}
	if err != nil {
		return setupFailed("audit the writable roots", err)
	}
	return nil
}

// awaitPrepared waits for the command's preparation (see Start) and
// returns its error. Only Start's goroutine calls it.
func (c *Cmd) awaitPrepared() error {
	if c.prepared != nil {
		c.prepErr = <-c.prepared
		c.prepared = nil
	}
	return c.prepErr
}

// setupFailed is the error of a setup step op that failed with err: a
// *ResourceError when the host ran out of something, else a *SetupError.
func setupFailed(op string, err error) error {
	if re := ResourceErrorOf(op, err); re != nil {
		return re
	}
	return &SetupError{Detail: err.Error(), Err: err}
}

// closeProxy closes a proxy made for this command alone.
func (c *Cmd) closeProxy() {
	if c.ownProxy && c.Proxy != nil {
		c.Proxy.Close()
	}
}

// groupNonce names a command's cgroup uniquely.
func groupNonce() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// starting is one runner on its way to "ready": what its messages build,
// and what startRunner rolls back when the command does not run.
type starting struct {
	c       *Cmd
	proc    *os.Process
	ctrl    *os.File
	tree    *runner.Tree
	eg      *egressSession
	denials *facts.Log
	// changed records the paths the command changes (confined modes).
	changed *changes.Tracker
	n       *supervisor.Notifier
	// confined is the process that loads the seccomp filter: the runner,
	// or the init of its pid namespace when it made one.
	confined int
	// keeper is the inner keeper, without a pid namespace.
	keeper int
	// ready: the command runs, and the Cmd owns all of the above.
	ready bool
	// stopped: stop ran.
	stopped bool
}

// stop kills and reaps the runner's tree and closes what was made for it,
// once.
func (s *starting) stop() {
	if s.tree == nil || s.stopped {
		return
	}
	s.stopped = true
	s.tree.Kill()
	<-s.tree.Reaped()
	s.ctrl.Close()
	if s.n != nil {
		s.n.Finish(runner.LostWait)
	}
	s.changed.Close()
}

// startRunner starts one runner and waits until the command runs or the
// runner says why it cannot. On failure everything it started is gone. The
// runner starts while the command is prepared (prepareCommand, beside):
// its spec follows.
func (c *Cmd) startRunner(runnerPath string, userNS bool, ports []uint16) (err error) {
	s := &starting{c: c, denials: facts.NewLog()}
	defer func() {
		if err != nil {
			s.stop()
			if s.eg != nil {
				s.eg.close()
			}
		}
	}()
	if c.Policy.Allowlist != nil && c.Policy.Mode.Confines() {
		conf := c.resolvConf
		if conf == "" {
			conf = resolvConf
		}
		if s.eg, err = c.Proxy.newSession(c.Policy.Allowlist, c.Policy.Mode, s.denials, nameservers(conf)); err != nil {
			return &SetupError{Detail: err.Error(), Err: err}
		}
	}
	// On cgroup v2 the runner starts inside the command's group; where
	// that fails (clone3 before Linux 5.7, a group the kernel refuses) it
	// starts outside and joins it below.
	var cgroupDir *os.File
	if c.group != nil {
		cgroupDir, _ = c.group.OpenDir()
	}
	proc, ctrl, joined := c.forkFromSession(runnerPath, userNS, s.eg, cgroupDir)
	fromSession := proc != nil
	if proc == nil {
		proc, ctrl, err = c.spawnRunner(runnerPath, s.eg, cgroupDir)
		joined = err == nil && cgroupDir != nil
	}
	if err != nil && cgroupDir != nil {
		var se *SetupError
		if errors.As(err, &se) {
			proc, ctrl, err = c.spawnRunner(runnerPath, s.eg, nil)
		}
	}
	if cgroupDir != nil {
		cgroupDir.Close()
	}
	if err != nil {
		return err
	}
	s.proc, s.ctrl, s.tree, s.confined = proc, ctrl, runner.StartTree(proc.Pid), proc.Pid
	if c.Policy.Mode.Confines() && c.Transaction == nil {
		// (A transaction's changes are read from its upper layer: once
		// the command is gone, so is its overlay.)
		s.changed = changes.NewTracker(c.Policy)
	}
	// The command may run before "ready" (right after its execve) and
	// stop or kill the runner's processes: a relay gone before "ready"
	// must not hold Start either.
	setupDone := make(chan struct{})
	defer close(setupDone)
	s.tree.AbandonSetup(ctrl, setupDone)
	// The runner reads the spec's first part before it does anything
	// else: it joins the group itself on receiving it (cgroup v1, the
	// group's files come with it), or is moved in now, so that it and
	// everything it forks are in the group. Then it makes its namespaces
	// while this process prepares the command.
	var join []*os.File
	if c.group != nil && !joined {
		var err error
		if join, err = c.group.JoinFiles(); err != nil {
			if err := c.group.Add(proc.Pid); err != nil {
				c.group.Close()
				c.group = nil
				if fromSession && c.Policy.Limits.MaxPids > 0 && os.Getuid() != 0 {
					// The limit falls to RLIMIT_NPROC, which in the
					// session's user namespace would count every
					// command of the session: Start spawns a runner.
					return errNprocInSession
				}
			}
		}
	}
	defer func() {
		for _, f := range join {
			f.Close()
		}
	}()
	var rights []byte
	if len(join) > 0 {
		fds := make([]int, len(join))
		for i, f := range join {
			fds[i] = int(f.Fd())
		}
		rights = unix.UnixRights(fds...)
	}
	if err := runner.SendBytes(ctrl, runner.SpecTokens(namespaceOptions(c.Policy, userNS, len(c.ExtraFiles), len(join)), nil), rights); err != nil {
		return s.sendFailed(err)
	}
	if err := c.awaitPrepared(); err != nil {
		return err
	}
	nproc := 0
	if c.group == nil {
		nproc = c.Policy.Limits.MaxPids
	}
	listen, dns := "", ""
	if s.eg != nil {
		listen, dns = s.eg.listenAddrs(), s.eg.dnsAddrs()
	}
	spec, err := c.prep.spec(userNS, c.Path, len(c.ExtraFiles), nproc, len(join), listen, dns)
	if err != nil {
		return setupFailed("prepare the sandbox", err)
	}
	// The spec carries the mount plan, one entry per mount point: let it
	// be as large as the host allows (the kernel caps this at wmem_max).
	unix.SetsockoptInt(int(ctrl.Fd()), unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	if err := runner.SendBytes(ctrl, spec, nil); err != nil {
		return s.sendFailed(err)
	}
	if c.Policy.Mode.Confines() {
		var rights []byte
		if c.prep.ruleset != nil {
			rights = unix.UnixRights(int(c.prep.ruleset.Fd()))
		}
		if err := runner.SendBytes(ctrl, c.prep.programs(), rights); err != nil {
			return s.sendFailed(err)
		}
	}
	return s.waitReady()
}

// waitReady handles the runner's messages until the command runs, or until
// the runner says why it cannot (or ends without saying).
func (s *starting) waitReady() error {
	for !s.ready {
		var m runner.Msg
		fd, err := runner.RecvMsg(s.ctrl, &m)
		if err != nil {
			if errors.Is(err, runner.ErrClosed) {
				s.stop() // the runner's status, once it is reaped
				return &SetupError{Detail: fmt.Sprintf("the sandbox runner exited before the command started (%s)", describeStatus(s.tree.Status()))}
			}
			if re := ResourceErrorOf("receive the runner's message", err); re != nil {
				return re // a descriptor it sent, dropped for want of one here
			}
			return controlSocket(err)
		}
		if fd >= 0 && m.Kind != runner.MsgListener {
			unix.Close(fd) // the runner passes no other descriptor
		}
		if err := s.handle(m, fd); err != nil {
			return err
		}
	}
	return nil
}

// sendFailed is the error of a send to the runner that failed with err: the
// runner may have failed first (it makes its namespaces while this process
// prepares), and then its fail message, still in the socket, says why.
func (s *starting) sendFailed(err error) error {
	if re := ResourceErrorOf("send the runner its spec", err); re != nil {
		// ETOOMANYREFS: the descriptors this user has in flight, in every
		// process, exceed this process's RLIMIT_NOFILE.
		return re
	}
	if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) {
		// Every end of the runner's is closed: what it sent is all left
		// to read, and reading it ends.
		if werr := s.waitReady(); werr != nil {
			return werr
		}
	}
	return controlSocket(err)
}

// controlSocket is the error of a failed exchange with the runner.
func controlSocket(err error) error {
	return &SetupError{Detail: fmt.Sprintf("control socket: %v", err)}
}

// ack answers a runner's message that waits for one.
func (s *starting) ack() error {
	if err := runner.SendMsg(s.ctrl, runner.Msg{Kind: runner.MsgAck}, -1); err != nil {
		return controlSocket(err)
	}
	return nil
}

// handle takes one message of the runner; fd is the descriptor that came
// with a listener message (-1: none).
func (s *starting) handle(m runner.Msg, fd int) error {
	switch m.Kind {
	case runner.MsgInit:
		s.confined = m.Pid
		s.tree.SetKeeper(m.Pid, true)
		return nil
	case runner.MsgKeeper:
		s.tree.SetKeeper(m.Pid, false)
		s.keeper = m.Pid
		return nil
	case runner.MsgListener:
		return s.onListener(m, fd)
	case runner.MsgNetListen:
		return s.onNetListen(m)
	case runner.MsgFail:
		if m.Errno != 0 && isResourceErrno(syscall.Errno(m.Errno)) {
			return &ResourceError{Op: "runner: " + m.Op, Err: syscall.Errno(m.Errno)}
		}
		return &SetupError{Detail: m.Detail}
	case runner.MsgExecFail:
		if isResourceErrno(syscall.Errno(m.Errno)) {
			return &ResourceError{Op: "exec " + s.c.Args[0], Err: syscall.Errno(m.Errno)}
		}
		return &ExecError{Detail: m.Detail, Err: syscall.Errno(m.Errno)}
	case runner.MsgReady:
		return s.onReady(m)
	default:
		return &SetupError{Detail: fmt.Sprintf("unexpected runner message %q", m.Kind)}
	}
}

// onListener starts the supervisor on the seccomp listener lfd.
func (s *starting) onListener(m runner.Msg, lfd int) error {
	c := s.c
	// The listener comes attached (SCM_RIGHTS), sent by a thread of the
	// command's process that the filter does not hold: no pidfd_getfd,
	// which some hosts (Docker's default seccomp profile) refuse.
	if lfd < 0 {
		return &SetupError{Detail: "the runner sent no seccomp listener"}
	}
	if link, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", lfd)); link != "anon_inode:seccomp notify" {
		unix.Close(lfd)
		return &SetupError{Detail: fmt.Sprintf("the runner's descriptor is not a seccomp listener (%q)", link)}
	}
	guard := supervisor.OpenGuardFor(m.MountView == 1, c.prep.abi)
	// The caches the command writes in the sandbox's store (through their
	// overlays, or their upper layers directly without a mount view):
	// writable roots for the notifier, never for the change facts or the
	// audit.
	pol := c.Policy
	if _, roots := c.prep.writtenCaches(m.Caches); len(roots) > 0 {
		pol.WritableRoots = append(slices.Clone(pol.WritableRoots), roots...)
	}
	cfg := supervisor.Config{
		Spec: c.prep.filterFor(m.MountView == 1), Policy: pol, Denials: s.denials, Changes: s.changed,
		Relay: s.proc.Pid, Ruleset: c.prep.ruleset, Guard: guard,
	}
	if c.startWalk != nil {
		cfg.FirstCall = c.startWalk.wait
	}
	n, err := supervisor.NewNotifier(lfd, cfg)
	if err != nil {
		if re := ResourceErrorOf("start the notifier", err); re != nil {
			return re
		}
		return &SetupError{Detail: err.Error()}
	}
	s.n = n
	if m.IPCNS != 1 {
		n.SharesIPC()
	}
	n.SetKeeper(s.keeper)
	if eg := s.eg; eg != nil {
		if m.NetNS == 1 && eg.count() != eg.sockets() {
			return &SetupError{Detail: fmt.Sprintf("egress: the runner handed over %d of %d sockets", eg.count(), eg.sockets())}
		}
		n.SetEgress(&supervisor.Egress{NetNS: m.NetNS == 1, Proxy: eg.proxy, Hosts: eg.hosts, DNS: eg.dns,
			Connecting: func(port uint16) { c.Proxy.expectFrom(port, eg) }})
	} else if c.prep.filterFor(m.MountView == 1).Inet {
		// The network is off and the command may have a loopback of its
		// own: only there, and only in its net namespace.
		n.SetEgress(&supervisor.Egress{NetNS: m.NetNS == 1})
	}
	if !c.prep.getfd {
		// No pidfd_getfd here (Docker's default seccomp profile):
		// sockets are replaced, not copied.
		n.NoPidfdGetfd()
	}
	go n.Run()
	return s.ack()
}

// onNetListen serves an egress listener the runner made in the command's
// net namespace.
func (s *starting) onNetListen(m runner.Msg) error {
	from := s.confined
	if m.Pid > 0 {
		from = m.Pid
	}
	if s.eg == nil {
		return &SetupError{Detail: "the runner made an egress listener without an allowlist"}
	}
	if m.FD < 0 {
		// A stub resolver address the namespace could not take (the
		// ready message says why).
		s.eg.skip()
		return s.ack()
	}
	lfd, err := takeFD(from, m.FD)
	if err != nil {
		if re := ResourceErrorOf("take an egress listener", err); re != nil {
			return re
		}
		return &SetupError{Detail: fmt.Sprintf("cannot take an egress listener from the runner: %v", err)}
	}
	if err := s.eg.serveListener(s.eg.count(), lfd); err != nil {
		return &SetupError{Detail: err.Error()}
	}
	return s.ack()
}

// onReady hands the running command to the Cmd.
func (s *starting) onReady(m runner.Msg) error {
	c := s.c
	if c.startWalk != nil && s.n == nil {
		// (The spec asked for a listener, and the command execs only
		// once the supervisor took it: this cannot happen.)
		return &SetupError{Detail: "the runner started the command without a seccomp listener"}
	}
	c.proc, c.ctrl, c.facts, c.notifier, c.tree, c.egress = s.proc, s.ctrl, s.denials, s.n, s.tree, s.eg
	if s.n != nil {
		c.changed = s.changed
	} else {
		s.changed.Close() // no supervisor: nothing was recorded
	}
	c.enf = withLimits(c.assess(m), c.Policy.Limits, c.limitsMechanism(m))
	if m.Layers != nil {
		c.pidNS, c.cmdPid = m.Layers.PID, m.Layers.CmdPid
	}
	c.done, c.exited = make(chan struct{}), make(chan struct{})
	go c.monitor()
	s.ready = true
	return nil
}

// closeExited closes the channel Exited returns, once.
func (c *Cmd) closeExited() { c.exitedOnce.Do(func() { close(c.exited) }) }

// Exited returns a channel closed once the command's status is known (the
// runner reported it, or the runner is gone): from then on nothing stops
// the command any more, though Wait may still wait for its processes and
// the post-run steps. It is nil before Start succeeded.
func (c *Cmd) Exited() <-chan struct{} { return c.exited }

// Enforcement is how the command is confined, known once Start succeeded
// (Wait's Result carries it too).
func (c *Cmd) Enforcement() Enforcement { return c.enf }

// monitor collects the runner's exit message and reaps it. No helper of the
// runner can hold it: a relay that does not end after the status, or a
// keeper that neither reports nor ends once the relay is gone (stopped,
// say), is killed with what is left of its tree.
func (c *Cmd) monitor() {
	defer close(c.done)
	defer c.closeExited()
	ctrlDone := make(chan struct{})
	go func() {
		defer close(ctrlDone)
		for {
			var m runner.Msg
			fd, err := runner.RecvMsg(c.ctrl, &m)
			if fd >= 0 {
				unix.Close(fd)
			}
			if err != nil {
				break
			}
			if m.Kind == runner.MsgExit {
				c.exit = &m
				c.closeExited() // the status stands, whatever teardown remains
				break
			}
			if m.Kind == runner.MsgEnded && c.group != nil {
				// The keeper walks the tree to kill what is left, which
				// a bomb out of the command's group and session can
				// outrun for seconds; the cgroup ends it at once, the
				// runner's processes with it: the status is here.
				// (Not waited for here: Finish does, once the
				// runner's processes are reaped.)
				c.exit = &m
				c.closeExited()
				c.group.KillNow()
				break
			}
			if m.Kind == runner.MsgFail {
				c.lost = &SetupError{Detail: m.Detail}
			}
		}
	}()
	select {
	case <-ctrlDone:
	case <-c.tree.Reaped():
		// The relay is gone without the status: its keeper reports, or
		// kills the tree and ends, at once — unless it cannot (stopped).
		select {
		case <-ctrlDone:
		case <-time.After(runner.LostWait):
			c.tree.Kill()
		}
	}
	select {
	case <-c.tree.Reaped():
	case <-time.After(runner.LostWait):
		c.tree.Kill() // the relay's work is done
		<-c.tree.Reaped()
	}
	select {
	case <-ctrlDone:
	case <-time.After(runner.LostWait):
		// Every helper was killed; a keeper that cannot die yet must not
		// hold the result.
		unix.Shutdown(int(c.ctrl.Fd()), unix.SHUT_RDWR)
		<-ctrlDone
	}
	c.ctrl.Close()
	if c.exit == nil && !c.pidNS {
		// The runner's relay is gone without the command's status (Kill,
		// which killed the tree first, or killed from outside). Its inner
		// keeper kills the tree (or was killed with it, above); should both
		// have been killed from outside, the orphans went to init: end the
		// command's session here, and stop waiting for the rest after a
		// while — whatever escaped by setsid stays confined by Landlock and
		// the filter, whose notified calls fail once the listener closes.
		runner.KillSession(c.cmdPid)
	}
	// notifyWait bounds the wait for the filter's last user to go.
	notifyWait := runner.LostWait
	if c.group != nil {
		// What is left in the group (a setsid'd process without a pid
		// namespace, the helpers both killed from outside) dies here.
		u, hits, err := c.group.Finish()
		c.usage = &u
		for _, h := range hits {
			c.facts.AddN(limitFact(h), h.Count)
		}
		if err == nil {
			// The group is removed, so no process of the command is
			// alive: none can make a call any more. The filter's
			// listener ends only once the last of them is reaped, and
			// without a pid namespace their reaper may be this process
			// (a CLI is a child subreaper), which reaps after Wait.
			notifyWait = 0
		}
	}
	if c.notifier != nil {
		c.notifier.Finish(notifyWait)
	}
	if c.egress != nil {
		c.egress.close()
	}
	c.closeProxy()
	// Every process of the command is gone: the paths it changed are what
	// they will stay, and nothing races the audit. The changes are read
	// first: what the audit sets aside is the command's write, not a removal.
	c.changes, c.changesDropped = c.changed.Settle()
	if w := c.startWalk; w != nil {
		if c.notifier != nil && c.notifier.MayHaveChanged() {
			// The first call waited for the walk; a failed walk failed
			// every call (facts say so), so nothing is left to audit.
			if w.wait() == nil {
				c.audits = w.audits
			}
		} else if c.AuditCache != nil && c.AuditCache.Watch {
			// Nothing changed, nothing to audit; but a watched cache's
			// next walk is cheap only after a whole one: keep this one.
			w.wait()
		} else {
			// Nothing let through or performed: nothing changed,
			// nothing to audit.
			w.abandon()
		}
	}
	audit.Finish(c.audits, c.facts, slices.Contains(c.enf.Layers, layerMountView) || c.prep.carved)
	if c.Transaction != nil {
		// After the audit: what it reverted is no change.
		c.transactionChanges()
		// Sealed as the command left it: the next command, a diff or a
		// commit refuses anything else.
		if err := c.txHold.Release(); err != nil {
			c.enf.Reasons = append(c.enf.Reasons, "transaction: "+err.Error())
		}
	}
	c.caches.Close()
	c.tree.Close()
}

// runnerFiles are the runner's fds from 3 on: its control socket, the
// command's extra files, then the transaction's hold (the runner counts
// only the extra files, so the command never gets it: close-on-exec in the
// runner, it stays with the runner's own processes, which end with the
// command's overlay).
func (c *Cmd) runnerFiles(ctrl *os.File) []*os.File {
	files := append([]*os.File{ctrl}, c.ExtraFiles...)
	if c.txHold != nil {
		files = append(files, c.txHold.Files()...)
	}
	return files
}

// transactionChanges sets the command's changes to its transaction's: every
// change in its upper layer so far (this command's and the earlier ones'
// in the same transaction). A layer that cannot be read is said in the
// enforcement's reasons.
func (c *Cmd) transactionChanges() {
	all, err := c.Transaction.Changes()
	if err != nil {
		c.enf.Reasons = append(c.enf.Reasons, "transaction: cannot list the changes: "+err.Error())
		return
	}
	// A transaction's changes are all in the workspace, its one root.
	for i := range all {
		all[i].Root = c.Policy.Workspace
	}
	c.changesDropped = nil
	if len(all) > MaxChanges {
		c.changes, c.changesDropped = all[:MaxChanges], map[string]int{c.Policy.Workspace: len(all) - MaxChanges}
		return
	}
	c.changes = all
}

// Wait waits for the command and everything it started to end, and returns
// its Result. When the runner was killed by a signal before it could report
// the command's status (Kill, or a SIGKILL from outside), the Result carries
// that signal; a runner that ended otherwise without a status is an error.
func (c *Cmd) Wait() (*Result, error) {
	if c.proc == nil || c.done == nil {
		return nil, errors.New("sandbox: not started")
	}
	c.waitOnce.Do(func() {
		<-c.done
		r := &Result{Facts: Facts{Mode: c.Policy.Mode, Enforcement: c.enf, Denials: c.facts.List(), DenialsDropped: c.facts.Dropped(),
			Changes: c.changes, Usage: c.usage}}
		for root, n := range c.changesDropped {
			if n > 0 {
				if r.ChangesDroppedByRoot == nil {
					r.ChangesDroppedByRoot = map[string]int{}
				}
				r.ChangesDroppedByRoot[root] = n
				r.ChangesDropped += n
			}
		}
		for i := range r.Denials {
			r.Denials[i].Suggest = facts.Suggest(r.Denials[i], c.Policy)
		}
		if r.Denials == nil {
			r.Denials = []Denial{}
		}
		if r.Changes == nil {
			r.Changes = []Change{}
		}
		// A resource limit the command hit is a fact, not a denial of
		// access: it does not make the result "denied".
		r.Denied = slices.ContainsFunc(r.Denials, func(d Denial) bool { return d.Op != facts.OpLimit })
		switch {
		case c.exit != nil:
			r.ExitCode, r.Signal = c.exit.ExitCode, syscall.Signal(c.exit.Signal)
		case c.lost != nil:
			c.waitErr = c.lost
			return
		default:
			ws, werr := c.tree.Status()
			c.killMu.Lock()
			killed := c.killed
			c.killMu.Unlock()
			switch {
			case werr == nil && ws.Signaled():
				r.Signal = ws.Signal()
				r.ExitCode = 128 + int(r.Signal)
				if !killed {
					r.RunnerFailed, r.RunnerFailure = true, fmt.Sprintf("the sandbox runner was killed by %s before the command ended", signame.Name(r.Signal))
				}
			case killed:
				// Kill's SIGKILL reached the tree before the relay's.
				r.Signal, r.ExitCode = syscall.SIGKILL, 128+int(syscall.SIGKILL)
			default:
				c.waitErr = fmt.Errorf("sandbox: the runner ended without the command's status (%s)", describeStatus(ws, werr))
				return
			}
		}
		c.result = r
	})
	return c.result, c.waitErr
}

// Signal sends sig to the runner, which forwards it to the command's
// process group (with SIGCONT after a terminating signal, so that a stopped
// command's trap runs).
func (c *Cmd) Signal(sig os.Signal) error {
	if c.proc == nil || c.done == nil {
		return errors.New("sandbox: not started")
	}
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("sandbox: unsupported signal %v", sig)
	}
	return c.tree.Signal(s)
}

// Kill ends the command and every process it started, at once, by SIGKILL
// from here: it needs nothing from the runner's processes, which may be
// stopped (see the runner package's Tree.Kill).
func (c *Cmd) Kill() error {
	if c.proc == nil || c.done == nil {
		return errors.New("sandbox: not started")
	}
	c.killMu.Lock()
	c.killed = true
	c.killMu.Unlock()
	if c.group != nil {
		// Everything in the command's cgroup at once (cgroup.kill, or
		// frozen and killed on v1): a bomb that left its group and
		// session is not left to the tree walk.
		c.group.Kill()
	}
	c.tree.Kill()
	return nil
}

// Pid is the runner's process id.
func (c *Cmd) Pid() int {
	if c.proc == nil {
		return 0
	}
	return c.proc.Pid
}

// selfExe names the running binary, whatever became of its path.
const selfExe = "/proc/self/exe"

// spawnRunner re-executes runnerPath as a runner with the command as its
// argv. No clone flags: the runner creates its namespaces itself, so this is
// a cheap vfork whatever the size of this process.
//
// With cgroupDir, the runner is cloned straight into that cgroup
// (clone3 with CLONE_INTO_CGROUP, still a vfork).
func (c *Cmd) spawnRunner(runnerPath string, eg *egressSession, cgroupDir *os.File) (*os.Process, *os.File, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if re := ResourceErrorOf("socketpair", err); re != nil {
			return nil, nil, re
		}
		return nil, nil, &SetupError{Detail: fmt.Sprintf("control socket: %v", err)}
	}
	ctrl := os.NewFile(uintptr(pair[0]), "dsh-sandbox-control")
	child := os.NewFile(uintptr(pair[1]), "dsh-sandbox-control")
	defer child.Close()
	env := c.runnerEnv(eg)
	// The control socket is the runner's fd 3; the command's extra files
	// follow it, and the runner moves them down to 3.. in the command.
	proc := &exec.Cmd{
		Path:       runnerPath,
		Args:       append([]string{runner.Arg0}, c.Args...),
		Env:        append(env, runner.EnvVar+"=1"),
		Dir:        c.Dir,
		Stdin:      readerOf(c.Stdin),
		Stdout:     writerOf(c.Stdout),
		Stderr:     writerOf(c.Stderr),
		ExtraFiles: c.runnerFiles(child),
	}
	// The runner leads a process group of its own, never the caller's:
	// without a pid namespace the command can stop its relay or keeper,
	// and a group holding a stopped process is sent SIGHUP and SIGCONT by
	// the kernel when it becomes orphaned (a keeper whose relay died first
	// exits with init, or another reaper outside the group, as its parent)
	// — which would end a caller in that group.
	proc.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if cgroupDir != nil {
		proc.SysProcAttr.UseCgroupFD, proc.SysProcAttr.CgroupFD = true, int(cgroupDir.Fd())
	}
	if err := proc.Start(); err != nil {
		ctrl.Close()
		if re := ResourceErrorOf("fork/exec the runner", err); re != nil {
			return nil, nil, re
		}
		return nil, nil, &SetupError{Detail: fmt.Sprintf("cannot start the runner %s: %v", runnerPath, unwrapExecErr(err))}
	}
	return proc.Process, ctrl, nil
}

// errNprocInSession: a runner forked by a session runner lost its cgroup,
// and the process limit would be RLIMIT_NPROC in the session's user
// namespace.
var errNprocInSession = errors.New("sandbox: process limit without a cgroup in a session")

// runnerEnv is the environment the runner gives the command.
func (c *Cmd) runnerEnv(eg *egressSession) []string {
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	switch {
	case eg != nil:
		env = append(withoutProxyEnv(env), eg.proxyEnv()...)
	case c.Policy.Mode.Confines() && !c.Policy.Network:
		// With the network off the caller's proxy is out of reach, and its
		// URL may carry a password.
		env = withoutProxyEnv(env)
	}
	return runner.EnvWithout(env, runner.EnvVar)
}

// forkFromSession starts the runner from c.Namespaces' session runner for
// the command's policy (see NamespaceCache): the same
// runner as spawnRunner's, with the same files, environment and working
// directory, forked in the session's namespaces; joined says it started in
// cgroupDir. It returns a nil proc when no session runner serves the
// command (no cache, a network allowlist, no user namespace asked or to be
// had, a process limit without a cgroup, a session runner that cannot
// fork): the caller then spawns a runner of its own, which says what fails.
func (c *Cmd) forkFromSession(runnerPath string, userNS bool, eg *egressSession, cgroupDir *os.File) (proc *os.Process, ctrl *os.File, joined bool) {
	if c.Namespaces == nil || !userNS || eg != nil || !c.Policy.Mode.Confines() {
		return nil, nil, false
	}
	if c.group == nil && c.Policy.Limits.MaxPids > 0 && os.Getuid() != 0 {
		// The process limit is then RLIMIT_NPROC, which counts the
		// processes of the user namespace: a session's would count every
		// command of the session.
		return nil, nil, false
	}
	// The environment as os/exec gives it a runner it spawns.
	env := dedupEnv(c.runnerEnv(eg))
	for _, s := range append(append([]string{}, c.Args...), env...) {
		if strings.IndexByte(s, 0) >= 0 {
			// Not a token: the runner of its own refuses it (os/exec).
			return nil, nil, false
		}
	}
	txDir := ""
	if c.Transaction != nil {
		txDir = c.Transaction.Dir()
	}
	key, err := sessionKeyOf(runnerPath, c.Policy, txDir)
	if err != nil {
		return nil, nil, false
	}
	dirPath := c.Dir
	if dirPath == "" {
		dirPath = "."
	}
	dir, err := os.OpenFile(dirPath, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		// A runner of its own says why, as os/exec does.
		return nil, nil, false
	}
	defer dir.Close()
	stdio := []*os.File{c.Stdin, c.Stdout, c.Stderr}
	for i, f := range stdio {
		if f == nil {
			flag := os.O_WRONLY
			if i == 0 {
				flag = os.O_RDONLY
			}
			null, err := os.OpenFile(os.DevNull, flag, 0)
			if err != nil {
				return nil, nil, false
			}
			defer null.Close()
			stdio[i] = null
		}
	}
	// A session runner found gone is replaced, once. Each try has a
	// control socket of its own: a runner forked by a session runner that
	// died before it answered must not share one with the next.
	for try := 0; try < 2; try++ {
		s := c.Namespaces.sessionFor(key)
		if s == nil {
			break
		}
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			break
		}
		ctrl = os.NewFile(uintptr(pair[0]), "dsh-sandbox-control")
		child := os.NewFile(uintptr(pair[1]), "dsh-sandbox-control")
		files := append(append([]*os.File{}, stdio...), c.runnerFiles(child)...)
		proc, joined, err = s.fork(c.Args, env, files, dir, cgroupDir)
		child.Close()
		if err == nil {
			return proc, ctrl, joined
		}
		ctrl.Close()
		if !s.dead.Load() {
			break
		}
	}
	return nil, nil, false
}

// dedupEnv is env as os/exec passes it to a process: the last of the
// entries of one name, in their order, without empty entries.
func dedupEnv(env []string) []string {
	out := make([]string, 0, len(env))
	seen := make(map[string]bool, len(env))
	for i := len(env) - 1; i >= 0; i-- {
		kv := env[i]
		k, _, ok := strings.Cut(kv, "=")
		if !ok {
			if kv != "" {
				out = append(out, kv)
			}
			continue
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, kv)
	}
	slices.Reverse(out)
	return out
}

// isResourceErrno reports whether err is running out of processes, file
// descriptors (open or in flight) or memory.
func isResourceErrno(err error) bool {
	for _, e := range []syscall.Errno{unix.EAGAIN, unix.EMFILE, unix.ENFILE, unix.ENOMEM, unix.ETOOMANYREFS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// ResourceErrorOf is the *ResourceError of op when err is running out of
// processes, file descriptors or memory, else nil.
func ResourceErrorOf(op string, err error) *ResourceError {
	if !isResourceErrno(err) {
		return nil
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		err = errno
	}
	return &ResourceError{Op: op, Err: err}
}

// takeFD takes a copy of fd of process pid (pidfd_getfd).
func takeFD(pid, fd int) (int, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(pidfd)
	lfd, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return -1, fmt.Errorf("pidfd_getfd: %w", err)
	}
	return lfd, nil
}

// readerOf and writerOf give a stream to os/exec: a nil *os.File must be a
// nil interface, which os/exec replaces by /dev/null (a nil *os.File inside
// an interface would leave the fd closed, and the command's next open would
// take it).
func readerOf(f *os.File) io.Reader {
	if f == nil {
		return nil
	}
	return f
}

func writerOf(f *os.File) io.Writer {
	if f == nil {
		return nil
	}
	return f
}

// describeStatus renders a wait status for an error message.
func describeStatus(ws unix.WaitStatus, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case ws.Exited():
		return fmt.Sprintf("exit status %d", ws.ExitStatus())
	case ws.Signaled():
		return "signal: " + signame.Name(ws.Signal())
	}
	return fmt.Sprintf("wait status %#x", uint32(ws))
}

// limitsMechanism is what enforces the command's limits, from its group
// and the runner's ready message.
func (c *Cmd) limitsMechanism(m runner.Msg) string {
	switch {
	case c.group != nil:
		return c.group.Mechanism()
	case m.Layers != nil && m.Layers.Nproc:
		return limitsRlimit
	}
	return limitsNone
}

// limitFact is the fact of a limit the command hit.
func limitFact(h limits.Hit) Denial {
	d := Denial{Op: facts.OpLimit, Address: h.Limit}
	switch h.Limit {
	case limits.Memory:
		d.Syscall, d.Errno = "oom-kill", "SIGKILL"
	case limits.Pids:
		d.Syscall, d.Errno = "fork", "EAGAIN"
	}
	return d
}
