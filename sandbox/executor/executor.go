package executor

import (
	"io"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/transaction"
)

// Defaults of an Executor's Config.
const (
	DefaultTimeout    = 120000 * time.Millisecond
	DefaultMaxTimeout = 600000 * time.Millisecond
	DefaultTailBytes  = 64000
	DefaultSpillCap   = 64 << 20
	DefaultKillGrace  = 3000 * time.Millisecond
)

// Config configures an Executor. The zero value is valid: read-only by
// default, the current directory as workspace, this binary as its runner.
type Config struct {
	// Mode is the mode of calls that name none. The zero value is
	// read-only, the fail-safe default.
	Mode modes.Mode
	// Workspace is the workspace root of calls without a session, and their
	// default working directory. "" means the current directory.
	Workspace string
	// AllowWrite are extra directories writable under workspace-write.
	AllowWrite []string
	// Protect are extra paths kept read-only inside the writable roots
	// (absolute, or relative to the workspace), besides modes.ProtectedNames
	// and git's control files (modes.DefaultProtected).
	Protect []string
	// Unprotect takes names out of modes.ProtectedNames, as
	// modes.Options.Unprotect.
	Unprotect []string
	// Network lets confined commands use the network.
	Network bool
	// Allowlist, when not nil (and Network false), lets confined commands
	// out only through the executor's egress proxy, to what it allows (see
	// modes.Allowlist and EgressProxy).
	Allowlist *modes.Allowlist
	// DenyRead and AllowRead change the deny-read set of the confined
	// modes, as modes.Options' fields of the same names (absolute paths).
	DenyRead, AllowRead []string
	// AllowBroadWorkspace lets a workspace (the executor's or a session's)
	// and the AllowWrite directories be /, a home directory or an ancestor of one
	// under workspace-write; otherwise New and Resolve refuse them
	// with a *modes.BroadWorkspaceError (errors.Is modes.ErrBroadWorkspace).
	// A broad $TMPDIR is always refused.
	AllowBroadWorkspace bool
	// Limits are every command's resource limits: nil means
	// modes.DefaultLimits(); a zero field of a non-nil value is unlimited.
	// Limits the host cannot enforce are reported in Enforcement.Missing.
	Limits *modes.Limits
	// NoCaches leaves the toolchain caches read-only under workspace-write;
	// CacheDir is where what commands add to them is kept ("": the
	// home's modes.HomeCacheDir). See modes.Policy.Caches.
	NoCaches bool
	CacheDir string

	// DefaultTimeout applies to calls that give none (0: 120000 ms);
	// MaxTimeout caps every call (0: 600000 ms).
	DefaultTimeout, MaxTimeout time.Duration
	// TailBytes is how much of each stream is kept in memory (0: 64000).
	TailBytes int
	// SpillCap is the size past which a spill file is deleted and only the
	// tail kept (0: 64 MiB).
	SpillCap int64
	// KillGrace is the time between SIGTERM and SIGKILL, and the longest
	// the pipes are drained after the command ended (0: 3000 ms).
	KillGrace time.Duration
	// SpillDir is where the executor's private 0700 spill directory is
	// created ("": os.TempDir()).
	SpillDir string

	// Runner is the binary re-executed as the sandbox runner: "" means this
	// executable (any binary linking this package is its own runner, with
	// no call needed in main), or the path of an installed dsh-sandbox-run.
	// danger-full-access never uses it.
	Runner string
	// Shell is the shell commands run with as `<Shell> -c <command>`
	// ("": bash, found in PATH when the executor is created).
	Shell string
	// Environ returns the parent environment commands inherit (scrubbed);
	// nil means os.Environ. It must be safe for concurrent use.
	Environ func() []string
}

// Session is the calling session of a request.
type Session struct {
	// ID identifies the session (for the caller's bookkeeping).
	ID string
	// Workspace is the session's workspace root: writable under
	// workspace-write, the base of relative workdirs and the default one.
	Workspace string
}

// Request is one command to run. Command, Workdir and TimeoutMs may come
// from a model; the other fields are trusted, set by the harness only.
type Request struct {
	// Command runs as `bash -c <Command>`.
	Command string
	// Workdir is the working directory: absolute, or relative to the
	// session's workspace; "" means the session's workspace (or, with no
	// session, the executor's).
	Workdir string
	// TimeoutMs is the foreground timeout in milliseconds; nil means the
	// default. It is capped at the maximum; a non-positive or non-finite
	// value is an error. Background commands have no timeout.
	TimeoutMs *float64

	// Mode is the mode to run under; nil means the executor's default.
	Mode *modes.Mode
	// Session is the calling session, or nil.
	Session *Session
	// StdoutMaxBytes raises the in-memory stdout tail of a foreground
	// command (0: the executor's TailBytes).
	StdoutMaxBytes int
	// Stdin is the command's standard input; nil means /dev/null.
	Stdin io.Reader
	// Output, when not nil, receives the command's output (stdout and
	// stderr, as read) while it runs, for progress reports. It is called
	// from the goroutines that drain the pipes: it must return at once, and
	// must not keep p.
	Output func(p []byte)
	// Env is set in the command's environment over the scrubbed parent's.
	Env map[string]string
	// DshEnv is the managed DSH_* snapshot, set last.
	DshEnv map[string]string
	// Network replaces the executor's network policy (Config.Network and
	// Config.Allowlist) for this command; nil keeps it.
	Network *Network
	// Grant widens this one command narrowly, keeping every layer: more
	// writable directories, destinations and writable protected names (an
	// approver's "allow just these" instead of a wider mode); nil: none.
	Grant *Grant
	// Transaction runs the command in that transaction (Cmd.Transaction):
	// its workspace must be the request's, its mode a confined one.
	Transaction *transaction.Tx
}

// Network is a network policy: off (the zero value), everything (On), or
// only what Allowlist allows, through the executor's egress proxy.
type Network struct {
	On        bool
	Allowlist *modes.Allowlist
}

// Grant is what a request adds to the executor's policy for one command,
// each entry checked as Config's are (a directory must exist and not be
// broad; a host must be a loopback HOST:PORT; a name must be one of
// modes.ProtectedNames). Domains and hosts make or extend the allowlist;
// with the network on they add nothing.
type Grant struct {
	AllowWrite  []string
	AllowDomain []string
	AllowHost   []string
	Unprotect   []string
}

// Resolved is a request with every default filled in: what will be spawned.
type Resolved struct {
	Command   string
	Workdir   string        // absolute
	Timeout   time.Duration // effective foreground timeout
	TimeoutMs float64       // the same, in milliseconds
	Mode      modes.Mode
	Policy    modes.Policy
	Env       []string // the command's whole environment, sorted
	Stdin     io.Reader
	Output    func(p []byte)
	// StdoutTail and StderrTail are the in-memory tail sizes.
	StdoutTail, StderrTail int
	// Transaction is the request's, or nil.
	Transaction *transaction.Tx
}
