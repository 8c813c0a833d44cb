//go:build linux

package executor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Executor runs shell commands under a sandbox mode: foreground with Run,
// background with Start. It is safe for concurrent use by many sessions.
type Executor struct {
	cfg       Config
	workspace string // canonical
	shell     string
	spillDir  string // private 0700 directory (canonical path)
	spill     *spillDir
	runSeq    atomic.Int64

	proxy *sandbox.EgressProxy // started by the first command with the allowlist
	audit sandbox.AuditCache   // what the post-run audits read and watch, for the next commands
	// namespaces: the namespaces the commands of one policy share
	namespaces sandbox.NamespaceCache
	// rulesets: the Landlock rulesets' derivations, for the next commands of
	// their policy
	rulesets sandbox.RulesetCache

	mu     sync.Mutex
	live   map[*job]struct{}
	closed bool
}

// New checks cfg, fills its defaults and creates the private spill
// directory. It does not check the runner: a missing runner makes each
// confined call fail with a *SandboxUnavailableError.
func New(cfg Config) (*Executor, error) {
	if !cfg.Mode.Valid() {
		return nil, fmt.Errorf("sandbox: config: %w %d", modes.ErrUnknownMode, int(cfg.Mode))
	}
	fill := func(d *time.Duration, def time.Duration, name string) error {
		if *d == 0 {
			*d = def
		}
		if *d < 0 {
			return fmt.Errorf("sandbox: config: %s must be positive, got %v", name, *d)
		}
		return nil
	}
	if err := errors.Join(
		fill(&cfg.DefaultTimeout, DefaultTimeout, "DefaultTimeout"),
		fill(&cfg.MaxTimeout, DefaultMaxTimeout, "MaxTimeout"),
		fill(&cfg.KillGrace, DefaultKillGrace, "KillGrace"),
	); err != nil {
		return nil, err
	}
	if cfg.DefaultTimeout > cfg.MaxTimeout {
		return nil, fmt.Errorf("sandbox: config: DefaultTimeout %v exceeds MaxTimeout %v", cfg.DefaultTimeout, cfg.MaxTimeout)
	}
	if cfg.TailBytes == 0 {
		cfg.TailBytes = DefaultTailBytes
	}
	if cfg.SpillCap == 0 {
		cfg.SpillCap = DefaultSpillCap
	}
	if cfg.TailBytes < 0 || cfg.SpillCap < 0 {
		return nil, fmt.Errorf("sandbox: config: TailBytes and SpillCap must be positive")
	}
	if cfg.Environ == nil {
		cfg.Environ = os.Environ
	}
	// The workspace and extra roots must be usable now: derive once.
	probe, err := modes.Derive(modes.Options{
		Mode: modes.WorkspaceWrite, Workspace: cfg.Workspace, AllowWrite: cfg.AllowWrite, Protect: cfg.Protect,
		Unprotect: cfg.Unprotect, DenyRead: cfg.DenyRead, AllowRead: cfg.AllowRead, Limits: cfg.Limits,
		Network: cfg.Network, Allowlist: cfg.Allowlist, NoCaches: cfg.NoCaches, CacheDir: cfg.CacheDir,
		// A broad workspace only matters where it would be writable.
		AllowBroadWorkspace: cfg.AllowBroadWorkspace || cfg.Mode != modes.WorkspaceWrite,
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox: config: %w", err)
	}
	shell := cfg.Shell
	if shell == "" {
		shell = "bash"
	}
	if !strings.Contains(shell, "/") {
		p, err := exec.LookPath(shell)
		if err != nil {
			return nil, fmt.Errorf("sandbox: config: cannot find the shell: %w", err)
		}
		shell = p
	}
	if shell, err = filepath.Abs(shell); err != nil {
		return nil, fmt.Errorf("sandbox: config: shell: %w", err)
	}
	parent := cfg.SpillDir
	if parent == "" {
		parent = os.TempDir()
	}
	spill, err := newSpillDir(parent)
	if err != nil {
		return nil, fmt.Errorf("sandbox: config: %w", err)
	}
	// The proxy listens when the first command with an allowlist starts.
	e := &Executor{cfg: cfg, workspace: probe.Workspace, shell: shell, spill: spill, spillDir: spill.path,
		live: map[*job]struct{}{}, proxy: sandbox.NewEgressProxy()}
	e.audit.Watch = true // released by Close
	return e, nil
}

// Mode is the executor's default mode.
func (e *Executor) Mode() modes.Mode { return e.cfg.Mode }

// Network reports whether confined commands may use the network.
func (e *Executor) Network() bool { return e.cfg.Network }

// Allowlist is the network allowlist of confined commands, or nil.
func (e *Executor) Allowlist() *modes.Allowlist { return e.cfg.Allowlist }

// Workspace is the executor's canonical workspace root.
func (e *Executor) Workspace() string { return e.workspace }

// SpillDir is the executor's private spill directory.
func (e *Executor) SpillDir() string { return e.spillDir }

func (e *Executor) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// Close kills every command the executor still runs (SIGTERM, then SIGKILL
// after the grace), waits for them to settle, releases the audit's
// directory watches (sandbox.AuditCache), ends the session runners
// (sandbox.NamespaceCache) and releases the kept Landlock derivations
// (sandbox.RulesetCache). Spill files are left in place:
// their paths may have been handed out. Later calls fail with ErrClosed.
func (e *Executor) Close() error {
	e.mu.Lock()
	e.closed = true
	jobs := make([]*job, 0, len(e.live))
	for j := range e.live {
		jobs = append(jobs, j)
	}
	e.mu.Unlock()
	for _, j := range jobs {
		j.stop(causeKill)
	}
	for _, j := range jobs {
		<-j.settled
	}
	e.proxy.Close()
	e.audit.Close()
	e.namespaces.Close()
	e.rulesets.Close()
	e.spill.close() // removed only when empty
	return nil
}

// Resolve checks req and fills its defaults. Errors wrap ErrInvalidRequest,
// or a modes error when the workspace is unusable.
func (e *Executor) Resolve(req Request) (Resolved, error) {
	r := Resolved{Command: req.Command, Stdin: req.Stdin, Output: req.Output, StdoutTail: e.cfg.TailBytes, StderrTail: e.cfg.TailBytes, Transaction: req.Transaction}
	if strings.TrimSpace(req.Command) == "" {
		return Resolved{}, invalidf("command must be a non-empty string")
	}
	if strings.IndexByte(req.Command, 0) >= 0 {
		return Resolved{}, invalidf("command contains a NUL byte")
	}

	r.Mode = e.cfg.Mode
	if req.Mode != nil {
		if !req.Mode.Valid() {
			return Resolved{}, invalidf("%v %d", modes.ErrUnknownMode, int(*req.Mode))
		}
		r.Mode = *req.Mode
	}

	base := e.workspace
	if req.Session != nil && req.Session.Workspace != "" {
		if !filepath.IsAbs(req.Session.Workspace) {
			return Resolved{}, invalidf("session workspace %q is not absolute", req.Session.Workspace)
		}
		base = filepath.Clean(req.Session.Workspace)
	}
	timeout := float64(e.cfg.DefaultTimeout) / float64(time.Millisecond)
	if req.TimeoutMs != nil {
		v := *req.TimeoutMs
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return Resolved{}, invalidf("timeout must be a positive finite number of milliseconds, got %v", v)
		}
		timeout = v
	}
	timeout = math.Min(timeout, float64(e.cfg.MaxTimeout)/float64(time.Millisecond))
	r.TimeoutMs = timeout
	r.Timeout = time.Duration(timeout * float64(time.Millisecond))

	for _, layer := range []map[string]string{req.Env, req.DshEnv} {
		for k, v := range layer {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
				return Resolved{}, invalidf("environment variable %q: names must be non-empty without '=' or NUL, values without NUL", k)
			}
		}
	}
	r.Env = ChildEnv(e.cfg.Environ(), req.Env, req.DshEnv)
	if err := checkExecEnv(e.shell, r.Env); err != nil {
		return Resolved{}, err
	}

	if req.StdoutMaxBytes < 0 {
		return Resolved{}, invalidf("StdoutMaxBytes must not be negative, got %d", req.StdoutMaxBytes)
	}
	r.StdoutTail = max(r.StdoutTail, req.StdoutMaxBytes)

	network, allowlist := e.cfg.Network, e.cfg.Allowlist
	if req.Network != nil {
		if req.Network.On && req.Network.Allowlist != nil {
			return Resolved{}, invalidf("network: an allowlist with the network on")
		}
		network, allowlist = req.Network.On, req.Network.Allowlist
	}
	allowWrite, unprotect := e.cfg.AllowWrite, e.cfg.Unprotect
	if g := req.Grant; g != nil {
		allowWrite = append(slices.Clip(allowWrite), g.AllowWrite...)
		unprotect = append(slices.Clip(unprotect), g.Unprotect...)
		if !network && (len(g.AllowDomain) > 0 || len(g.AllowHost) > 0) {
			var al modes.Allowlist
			if allowlist != nil {
				al = *allowlist
			}
			al.Domains = append(slices.Clip(al.Domains), g.AllowDomain...)
			for _, h := range g.AllowHost {
				ap, err := modes.ParseHost(h)
				if err != nil {
					return Resolved{}, invalidf("grant: %v", err)
				}
				al.Hosts = append(slices.Clip(al.Hosts), ap)
			}
			allowlist = &al
		}
	}
	var denyRead, allowRead []string
	if r.Mode.Confines() { // danger-full-access hides nothing
		denyRead, allowRead = e.cfg.DenyRead, e.cfg.AllowRead
	}
	policy, err := modes.Derive(modes.Options{
		Mode:       r.Mode,
		DenyRead:   denyRead,
		AllowRead:  allowRead,
		Workspace:  base,
		AllowWrite: allowWrite,
		// Other sessions' spill files are not the command's to change.
		Protect:   append(append([]string(nil), e.cfg.Protect...), e.spillDir),
		Unprotect: unprotect,
		Network:   network,
		Allowlist: allowlist,
		Limits:    e.cfg.Limits,
		TempDir:   lookupEnv(r.Env, "TMPDIR"),
		NoCaches:  e.cfg.NoCaches,
		CacheDir:  e.cfg.CacheDir,
		CacheHome: lookupEnv(r.Env, "HOME"),
		// Neither / nor a home (the command's $HOME too) becomes writable.
		AllowBroadWorkspace: e.cfg.AllowBroadWorkspace,
		Homes:               []string{lookupEnv(r.Env, "HOME")},
	})
	if err != nil {
		// Out of descriptors while opening the workspace is not a bad
		// request: the caller retries, it does not fix its arguments.
		if re := sandbox.ResourceErrorOf("open workspace", err); re != nil {
			return Resolved{}, re
		}
		return Resolved{}, err
	}
	r.Policy = policy
	if tx := req.Transaction; tx != nil {
		if !r.Mode.Confines() {
			return Resolved{}, invalidf("a transaction needs a confined mode (%s writes to the workspace directly)", r.Mode)
		}
		if tx.Workspace() != policy.Workspace {
			return Resolved{}, invalidf("transaction %s is for the workspace %s, not %s", tx.Dir(), tx.Workspace(), policy.Workspace)
		}
	}

	// Workdirs resolve against the canonical workspace the policy uses, so
	// confinement and spawn never read one path two ways.
	base = policy.Workspace
	switch {
	case req.Workdir == "":
		r.Workdir = base
	case filepath.IsAbs(req.Workdir):
		r.Workdir = filepath.Clean(req.Workdir)
	default:
		r.Workdir = filepath.Join(base, req.Workdir)
	}
	if fi, err := os.Stat(r.Workdir); err != nil {
		return Resolved{}, invalidf("workdir %q: %v", r.Workdir, errors.Unwrap(err))
	} else if !fi.IsDir() {
		return Resolved{}, invalidf("workdir %q is not a directory", r.Workdir)
	}
	return r, nil
}

// newSpill creates a spill file for one stream of run n.
func (e *Executor) newSpill(n int64) spillFunc {
	return func(stream string) (*os.File, func(), error) {
		var rnd [6]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			return nil, nil, err
		}
		name := fmt.Sprintf("dsh-subprocess-%d-%d-%s-%s.log", os.Getpid(), n, hex.EncodeToString(rnd[:]), stream)
		return e.spill.create(name)
	}
}
