//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/cachestore"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/credfiles"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/mountplan"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/runner"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/landlock"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/transaction"
)

// preparation is everything the supervisor builds for one runner before it
// starts: the Landlock ruleset fd, the seccomp program, and the facts that
// decide the runner's spec. Policy logic lives here, in Go; the C runner
// only applies it.
type preparation struct {
	policy      modes.Policy
	abi         int
	landlockErr string
	ruleset     *os.File
	// bpf is the seccomp program, and filter what it was built from (the
	// notifier reads the same). It leaves metadata changes (chmod, chown,
	// utimes, xattrs) to the mount view's read-only mounts; noView, when
	// set, is the program a runner that ends up without a mount view loads
	// instead, which routes them to the supervisor (filterNoView): the
	// runner gets both and picks, and says which in its listener message.
	// Unset where the command runs only with a mount view anyway
	// (needView, no Landlock), and without user notification (nothing
	// could route them).
	bpf, noView          []byte
	filter, filterNoView seccomp.Spec
	notify               bool
	// getfd: pidfd_getfd works here, so the supervisor can act on copies
	// of the command's sockets (Docker's default seccomp profile refuses
	// it without CAP_SYS_PTRACE; Linux < 5.6 lacks it).
	getfd bool
	// carved: the ruleset leaves every protected path that exists out of
	// every write right (landlock.Options.CarveProtected).
	carved bool
	// masks are the deny-read paths the mount view hides (those that
	// exist), llMasks those the ruleset leaves out of every read right.
	masks, llMasks []string
	// needView says why the command must not run without the mount view
	// ("": it may): a mask the ruleset cannot cover, or a transaction.
	needView string
	// overlay is a transaction's overlay over the workspace, or nil.
	overlay *mountplan.Overlay
	// rules is the Landlock ruleset derived (valid when ruleset is set);
	// caches are the toolchain caches' overlays (see addCaches).
	rules  landlock.Ruleset
	caches []mountplan.Overlay
	// cacheEnv are the caches' variables for a runner without a mount
	// view, "INDEX:NAME=VALUE" (see addCaches).
	cacheEnv []string
	// creds are the sanitized copies of the credential files the mount
	// view shows (nil: none made); removed by close.
	creds *mountplan.Credentials
	// plan is the mount plan (makePlan), or planErr why there is none.
	plan    []string
	planErr error
}

// prepare builds what a runner needs for policy p, with a Landlock ABI of
// at most maxABI (0: the kernel's; see Cmd.LandlockABI). egressPorts are
// the TCP ports of the egress proxy and the allowlist's hosts, under a
// network allowlist. tx, when not nil, is the transaction the command runs
// in; layers are the toolchain caches' (cachestore.Open, see addCaches).
// rulesets, when not nil, keeps the rulesets' derivations for reuse.
func prepare(p modes.Policy, maxABI int, egressPorts []uint16, tx *transaction.Tx, layers []cachestore.Layer, rulesets *landlock.Cache) (*preparation, error) {
	prep := &preparation{policy: p}
	if tx != nil {
		if err := transactionFits(p, tx); err != nil {
			return nil, err
		}
		// The runner mounts the layers as the hold's descriptors (their
		// numbers are known in spec).
		prep.overlay = &mountplan.Overlay{Root: p.Workspace, Upper: tx.UpperDir(), Work: tx.WorkDir(), Dir: tx.Dir()}
	}
	if !p.Mode.Confines() {
		return prep, nil
	}
	if !seccomp.Supported() {
		return nil, errors.New("seccomp filtering is not available on this host")
	}
	// The listener travels by SCM_RIGHTS (the runner's send_listener):
	// user notification needs no pidfd_getfd. The supervisor acts on the
	// command's sockets through copies taken with pidfd_getfd where the
	// host allows it, else by replacing them (supervisor.NoPidfdGetfd).
	prep.notify = seccomp.NotifySupported()
	prep.getfd = pidfdGetfdSupported()
	if p.Allowlist != nil && !(prep.notify && prep.getfd) {
		// Only the supervisor can let an inet connect reach the proxy and
		// nothing else: the filter cannot read a socket address. Without
		// pidfd_getfd it could only replace an inet socket, which it
		// cannot see to be fresh (sock_diag lists no unbound inet socket),
		// and the runner's listeners in a net namespace are taken with
		// pidfd_getfd too.
		return nil, errors.New(allowlistRefusal)
	}
	abi, abiErr := effectiveABI(maxABI)
	if abiErr != nil {
		prep.landlockErr = abiErr.Error()
	} else {
		// Without user notification (Linux < 5.0) no supervisor pre-denies
		// writes to the protected paths, and the mount view may be missing
		// too: Landlock leaves them out of the writable roots instead.
		carve := !prep.notify
		derived, rs, err := rulesets.Build(p, abi, landlock.Options{CarveProtected: carve, ConnectTCP: egressPorts, OwnLoopback: ownLoopback(p, prep.notify),
			SupervisedBinds: p.Allowlist != nil, WritableDirs: cacheUppers(layers)})
		if err != nil {
			return nil, err
		}
		prep.abi, prep.ruleset, prep.rules = abi, rs, derived
		prep.carved = carve && len(landlock.Carved(p)) == existing(p.Protected)
		prep.llMasks = derived.MaskedPaths()
		if prep.overlay != nil {
			prep.overlay.Rules = derived.Beneath(p.Workspace)
		}
	}
	if prep.ruleset != nil {
		// The same stats (mountplan.Masks), done or checked by the
		// derivation.
		prep.masks = prep.rules.ExistingDenyRead()
	} else {
		prep.masks = mountplan.Masks(p)
	}
	if prep.ruleset != nil {
		for _, m := range prep.masks {
			if !slices.Contains(prep.llMasks, m) {
				prep.needView = fmt.Sprintf("cannot hide %s without a mount view: it lies in the writable root %s, where Landlock cannot deny reads (--allow-read %s)",
					m, mountplan.RootOf(p.WritableRoots, m), m)
				break
			}
		}
	}
	if prep.overlay != nil && prep.needView == "" {
		// Without the mount view there is no overlay: the command would
		// write to the workspace itself.
		prep.needView = transactionUnavailable + ": the workspace overlay needs a mount view (user and mount namespaces, overlayfs in a user namespace: Linux 5.11)"
	}
	// Metadata changes: Landlock does not cover them, the mount view does.
	// A runner that gets no mount view loads the second program, whose
	// supervisor performs them (seccomp.Spec.Metadata), at the cost of a
	// notification each; with a view that cost is not paid.
	prep.filter = filterSpec(p, prep.notify, abi, abiErr == nil, false)
	// With the mount view the command has a net namespace of its own too
	// (the same user namespace gives both): its loopback is its own.
	prep.filter.Inet = prep.filter.Inet || ownLoopback(p, prep.notify)
	bpf, err := seccomp.Program(prep.filter)
	if err != nil {
		prep.close()
		return nil, err
	}
	prep.bpf = bpf
	if prep.notify && abiErr == nil && prep.needView == "" {
		prep.filterNoView = filterSpec(p, prep.notify, abi, true, true)
		// Without the namespace the supervisor emulates a loopback of the
		// command's own on the host's (supervisor, loopback_linux.go),
		// acting on copies of its sockets.
		prep.filterNoView.Inet = prep.filterNoView.Inet || ownLoopback(p, prep.notify) && prep.getfd
		prep.filterNoView.OwnAddress = prep.filterNoView.Inet && prep.getfd
		if prep.noView, err = seccomp.Program(prep.filterNoView); err != nil {
			prep.close()
			return nil, err
		}
	}
	return prep, nil
}

// filterFor returns the filter a runner loaded: the one without metadata
// routing when it has a mount view, else the routing one (when there is
// one).
func (prep *preparation) filterFor(mountView bool) seccomp.Spec {
	if mountView || prep.noView == nil {
		return prep.filter
	}
	return prep.filterNoView
}

// programs returns the seccomp programs the runner receives, the second
// (when any) after the first: its length is the spec's "bpf2".
func (prep *preparation) programs() []byte {
	if prep.noView == nil {
		return prep.bpf
	}
	return append(append([]byte(nil), prep.bpf...), prep.noView...)
}

// transactionFits checks that a command under p can run in tx: a confined
// mode (read-only sees the transaction's changes and makes none), and tx's
// workspace.
func transactionFits(p modes.Policy, tx *transaction.Tx) error {
	if !p.Mode.Confines() {
		return fmt.Errorf("a transaction needs a confined mode (%s writes to the workspace directly)", p.Mode)
	}
	if tx.Workspace() != p.Workspace {
		return fmt.Errorf("transaction %s is for the workspace %s, not %s", tx.Dir(), tx.Workspace(), p.Workspace)
	}
	if roots := p.AuditedRoots(); len(roots) > 0 && roots[0] != p.Workspace {
		// (Its audit would read that root, not the upper layer.)
		return fmt.Errorf("a transaction covers the workspace only, and the writable root %s holds it", roots[0])
	}
	for _, r := range p.WritableRoots {
		if modes.Within(tx.Dir(), r) {
			// The command (or any other with that root) could rewrite
			// the upper layer there; the seal would notice, but only
			// after the command planted what the next one would use.
			return fmt.Errorf("transaction directory %s lies in the writable root %s, where a confined command could change it: put it outside every writable root (for example under ~/%s)", tx.Dir(), r, modes.HomeStateDir)
		}
	}
	return nil
}

// filterSpec returns the seccomp variant for policy p. With user
// notification the supervisor refuses, per run, what Landlock cannot stop
// when the runner ends up without a mount view (supervisor.OpenGuardFor). Without it
// (Linux < 5.0) the filter must decide before the runner does, so it
// assumes no mount view whenever Landlock is there; on a host that gets one,
// the cost is that truncate(2) (ABI < 3), ioctl-only opens and openat2 are
// refused even though the mount view would have made them safe. Without
// Landlock a confined command runs only with the mount view: nothing to add.
// metadata routes every metadata change to the supervisor
// (seccomp.Spec.Metadata), for a runner that may get no mount view.
func filterSpec(p modes.Policy, notify bool, abi int, landlockOK, metadata bool) seccomp.Spec {
	s := seccomp.Spec{Network: p.Network, Notify: notify, Inet: p.Allowlist != nil && notify && !p.Network, Metadata: notify && metadata}
	if !notify && landlockOK {
		s.DenyIoctlOpen = true
		s.DenyTruncate = abi < 3
	}
	// Below ABI 6 Landlock does not scope signals: the supervisor judges
	// them (internal/supervisor, signal_linux.go).
	s.Signals = notify && abi < 6
	return s
}

// ownLoopback says whether a command under p, with the network off and no
// allowlist, gets inet sockets on a loopback of its own: the supervisor
// (user notification) binds and connects them, to the loopback of its net
// namespace, or without one to an address of its own on the host's
// (supervisor.Egress without a proxy). Where the supervisor cannot act on
// copies of the command's sockets (no pidfd_getfd: Docker's profile) a
// runner without the namespace loads the filter that refuses inet sockets.
func ownLoopback(p modes.Policy, notify bool) bool {
	return notify && !p.Network && p.Allowlist == nil && p.Mode.Confines()
}

// effectiveABI is the kernel's Landlock ABI, capped at maxABI when that is
// positive.
func effectiveABI(maxABI int) (int, error) {
	abi, err := landlock.ABI()
	if err != nil {
		return 0, err
	}
	if maxABI > 0 && maxABI < abi {
		abi = maxABI
	}
	return abi, nil
}

// addCaches adds the toolchain caches' overlays (cachestore.Open's
// layers) to the mount plan, each writable through a Landlock rule on its
// inodes where there is a ruleset. For a runner without a mount view, the
// upper layer of each cache a tool finds through a variable
// (modes.CacheVariable) is writable too, by a rule of the ruleset
// (prepare gave it cacheUppers), and the variable goes in the spec
// (cacheEnv): the runner sets it then (unless the command has it), so the
// tool writes the sandbox's layer directly. With a mount view the layer is
// hidden (it lies beneath the state directory), so the rule reaches
// nothing.
func (prep *preparation) addCaches(layers []cachestore.Layer) {
	for i, l := range layers {
		ov := mountplan.Overlay{Root: l.Dir, Upper: l.Upper, Work: l.Work, Volatile: l.Volatile, BindUpper: l.Empty}
		if prep.ruleset != nil {
			ov.Rules = []landlock.Rule{prep.rules.WritableDir(l.Dir)}
		}
		prep.caches = append(prep.caches, ov)
		if byVariable(l) {
			prep.cacheEnv = append(prep.cacheEnv, strconv.Itoa(i)+":"+modes.CacheVariable(l.Dir)+"="+l.Upper)
		}
	}
}

// cacheUppers are the upper layers of the caches among layers that a tool
// finds through a variable (byVariable): the ruleset makes them writable.
func cacheUppers(layers []cachestore.Layer) []string {
	var out []string
	for _, l := range layers {
		if byVariable(l) {
			out = append(out, l.Upper)
		}
	}
	return out
}

// byVariable reports whether a tool finds the cache of layer l through a
// variable the runner can set to its upper layer.
func byVariable(l cachestore.Layer) bool {
	return modes.CacheVariable(l.Dir) != "" && !strings.ContainsRune(l.Upper, '\n')
}

// writtenCaches returns, from the runner's message's Caches, the cache
// directories the command writes in the sandbox's store (for the report),
// and the roots it writes them through (for the notifier): a cache's
// directory where its overlay was mounted ('1'), its upper layer where its
// variable was set ('e').
func (prep *preparation) writtenCaches(status string) (dirs, roots []string) {
	for i, c := range prep.caches {
		if i >= len(status) {
			break
		}
		switch status[i] {
		case '1':
			dirs, roots = append(dirs, c.Root), append(roots, c.Root)
		case 'e':
			dirs, roots = append(dirs, c.Root), append(roots, c.Upper)
		}
	}
	return dirs, roots
}

func (prep *preparation) close() {
	if prep.ruleset != nil {
		prep.ruleset.Close()
	}
	if prep.creds != nil {
		// The runner has mounted them (or never will): the mount view
		// keeps each copy for the command.
		os.RemoveAll(prep.creds.Dir)
	}
}

// credentialCopies makes the sanitized copies of the credential files among
// the masks, in a private directory of the supervisor's. A file that cannot
// be read or sanitized gets none, and stays hidden whole; so does every one
// when the directory cannot be made.
func (prep *preparation) credentialCopies() *mountplan.Credentials {
	var todo []string
	for _, m := range prep.masks {
		if slices.Contains(prep.policy.CredentialFiles, m) {
			todo = append(todo, m)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	dir, err := os.MkdirTemp(copiesParent(), "dsh-sandbox-credentials-")
	if err != nil {
		return nil
	}
	c := &mountplan.Credentials{Dir: dir, Copies: map[string]string{}}
	for _, m := range todo {
		if p, err := credfiles.Copy(m, dir); err == nil {
			c.Copies[m] = p
		}
	}
	return c
}

// copiesParent is where credentialCopies makes its directory: /dev/shm
// where it is a tmpfs this user may write to, so that making the copies and
// removing them writes no journal (in the temporary directory, on this
// project's ext4, that took 0.4–1 ms of every command's start as root,
// whose home has an .npmrc); else the temporary directory. Like /tmp,
// /dev/shm is a scratch root of every policy (modes.Policy), so the
// directory (0700, this user's, copies without secrets) is reachable as
// before, and hidden in the mount view the same way.
func copiesParent() string {
	var fs unix.Statfs_t
	if unix.Statfs("/dev/shm", &fs) == nil && fs.Type == unix.TMPFS_MAGIC && unix.Access("/dev/shm", unix.W_OK|unix.X_OK) == nil {
		return "/dev/shm"
	}
	return ""
}

// namespaceOptions are the options of the spec's first part, sent as soon
// as the runner is spawned (runner.SpecTokens): what its cgroup and
// namespaces need, known from the policy before it is prepared. spec
// repeats them, and the runner checks that both parts agree.
func namespaceOptions(p modes.Policy, userNS bool, extra, join int) [][2]string {
	confine := p.Mode.Confines()
	return [][2]string{
		{"confine", flag(confine)},
		{"userns", flag(confine && userNS)},
		{"netns", flag(!p.Network)},
		{"extra", strconv.Itoa(extra)},
		{"cgjoin", strconv.Itoa(join)},
	}
}

// flag is a boolean option's value.
func flag(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

// spec encodes the runner's whole spec, its second part (the first is
// namespaceOptions). With userNS the runner tries to create
// its namespaces (falling back to none where the host refuses them).
// path, when not "", is the file the runner executes (argv[0] is then only
// the command's name). extra is the number of the command's extra files
// (the runner's fds 4.., the command's 3..). join is the number of the
// command's cgroup files sent with the first part, for the runner to join
// the group itself (limits.Group.JoinFiles).
//
// listen and dns, under a network allowlist, are the addresses the runner
// listens on in the command's net namespace and those it binds the stub
// resolver to (egressSession.listenAddrs, dnsAddrs).
func (prep *preparation) spec(userNS bool, path string, extra, nproc, join int, listen, dns string) ([]byte, error) {
	p := prep.policy
	confine := p.Mode.Confines()
	opts := append(namespaceOptions(p, userNS, extra, join), [][2]string{
		{"landlock", flag(prep.ruleset != nil)},
		// The self-test path lies in /proc; a policy whose writable roots
		// cover /proc (workspace "/") leaves nothing to deny there.
		{"llselftest", flag(mountplan.RootOf(p.WritableRoots, "/proc") == "")},
		{"notify", flag(prep.notify)},
		// Without a pid namespace, the runner nests the command in a
		// Landlock domain of its own whose signal scope (ABI 6) keeps the
		// relay and the keeper out of its reach.
		{"scopesig", flag(prep.ruleset != nil && prep.abi >= 6)},
		{"needview", prep.needView},
		// The size of the program for a runner without a mount view,
		// sent after the other (0: none).
		{"bpf2", strconv.Itoa(len(prep.noView))},
		{"why", prep.landlockErr},
		{"path", path},
		// RLIMIT_NPROC, when no cgroup limits the command's pids (the
		// runner sets it only in a user namespace of its own, see
		// runner_main_linux.c).
		{"nproc", strconv.Itoa(nproc)},
		{"egress", listen},
		{"dns", dns},
		{"ncaches", strconv.Itoa(len(prep.caches))},
		{"cacheenv", strings.Join(prep.cacheEnv, "\n")},
	}...)
	var plan []string
	if confine && userNS {
		if prep.plan == nil && prep.planErr == nil {
			prep.makePlan(extra)
		}
		if prep.planErr != nil {
			return nil, prep.planErr
		}
		plan = prep.plan
	}
	return runner.SpecTokens(opts, plan), nil
}

// makePlan computes the mount plan of a runner with its namespaces (see
// spec; extra as there), with the credential files' copies it shows, into
// plan or planErr.
func (prep *preparation) makePlan(extra int) {
	p := prep.policy
	var ll landlock.MountAccess
	if prep.ruleset != nil {
		ll = landlock.MountAccessOf(prep.abi)
	}
	ov := prep.overlay
	if ov != nil {
		// The runner mounts the layers the supervisor opened and
		// checked (transaction.Hold), never what their paths name
		// by then: its fds 3 (control), 4.. (extra), then the hold's
		// directory, upper layer and work directory.
		hold := 4 + extra
		withFDs := *ov
		withFDs.UpperFD, withFDs.WorkFD = hold+1, hold+2
		ov = &withFDs
	}
	if prep.creds == nil {
		prep.creds = prep.credentialCopies()
	}
	prep.plan, prep.planErr = mountplan.Plan(p, ll, prep.masks, prep.creds, ov, prep.caches)
}

// assess turns the runner's ready message into the command's Enforcement.
func (c *Cmd) assess(m runner.Msg) Enforcement {
	var l layers
	if rl := m.Layers; rl != nil {
		l = layers{
			ns:        rl.Namespaces,
			mountView: rl.MountView, freshProc: rl.FreshProc, seccomp: rl.Seccomp, notify: rl.Notify,
			metadata: rl.Notify && c.prep.filterFor(rl.MountView).Metadata,
		}
		if rl.Landlock {
			l.landlockABI = c.prep.abi
			l.carved = c.prep.carved
		}
	}
	l.secrets = len(c.Policy.DenyRead) > 0
	e := assess(c.Policy.Mode, l)
	if c.Policy.Mode.Confines() {
		e.Masked = c.prep.masked(l.mountView, l.landlockABI > 0)
	}
	e.Caches, _ = c.prep.writtenCaches(m.Caches)
	if c.Policy.Allowlist != nil && c.Policy.Mode.Confines() {
		e.Layers = append(e.Layers, layerEgressProxy)
		if !l.ns.Net && l.landlockABI < 4 {
			e.Missing = append(e.Missing, missingEgressLandlock)
			if e.Level == levelFull {
				e.Level = levelPartial
			}
		}
	}
	if c.Policy.Mode.Confines() {
		nsErr := c.nsError
		if m.Layers != nil && m.Layers.NSError != "" {
			nsErr = m.Layers.NSError
		}
		for _, r := range []string{nsErr, c.prep.landlockErr, m.Detail} {
			if r != "" {
				e.Reasons = append(e.Reasons, r)
			}
		}
	}
	return e
}

// masked lists each hidden deny-read path with the layers that hid it,
// given whether the runner applied the mount view and Landlock.
func (prep *preparation) masked(mountView, landlockOn bool) []Masked {
	var out []Masked
	for _, m := range prep.masks {
		var by []string
		if mountView {
			by = append(by, layerMountView)
		}
		if landlockOn && slices.Contains(prep.llMasks, m) {
			by = append(by, layerLandlock)
		}
		if len(by) > 0 {
			_, sanitized := prep.creds.Copy(m)
			out = append(out, Masked{Path: m, Layers: by, Sanitized: sanitized && mountView})
		}
	}
	return out
}

func unwrapExecErr(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// allowlistRefusal is why a network allowlist cannot run on a host
// without user notification or pidfd_getfd.
const allowlistRefusal = "a network allowlist needs seccomp user notification with pidfd_getfd " +
	"(Linux 5.9 or later, and a seccomp profile that allows pidfd_getfd: Docker's default allows it only with --cap-add SYS_PTRACE), " +
	"which this host does not offer"

// pidfdGetfdSupported reports whether pidfd_open and pidfd_getfd work here.
func pidfdGetfdSupported() bool {
	pidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	defer unix.Close(pidfd)
	fd, err := unix.PidfdGetfd(pidfd, pidfd, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// existing counts the paths that name a directory entry.
func existing(paths []string) int {
	n := 0
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			n++
		}
	}
	return n
}
