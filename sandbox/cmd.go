package sandbox

import (
	"os"
	"syscall"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/transaction"
)

// SetupError reports that the sandbox could not be set up: the command never
// ran. Detail is one line saying why.
type SetupError struct {
	Detail string
	// Err is the cause when callers may branch on it (e.g.
	// modes.ErrInvalidPolicy), or nil.
	Err error
}

func (e *SetupError) Error() string { return e.Detail }

// Unwrap returns the cause, or nil.
func (e *SetupError) Unwrap() error { return e.Err }

// ExecError reports that the sandbox was set up but the command itself could
// not be started (its execve failed): Detail is "<argv0>: <reason>".
type ExecError struct {
	Detail string
	Err    syscall.Errno
}

func (e *ExecError) Error() string { return e.Detail }

// Unwrap returns the execve errno, so errors.Is(err, fs.ErrNotExist) holds
// for a missing command.
func (e *ExecError) Unwrap() error { return e.Err }

// Result is how a sandboxed command ended and what the sandbox saw.
type Result struct {
	// ExitCode is the command's exit status, or 128+N when it died of signal N.
	ExitCode int
	// Signal is the signal that killed the command (or the runner, when
	// Facts.RunnerFailed says so), or 0.
	Signal syscall.Signal
	Facts
}

// Cmd is a command to run under a sandbox policy. Fill the fields, then call
// Start and Wait (or Run), like os/exec.
type Cmd struct {
	Policy modes.Policy
	// Path is the file to execute; "" means Args[0], looked up in the PATH
	// of Env when it has no slash.
	Path string
	// Args is the command's argv.
	Args []string
	// Env is the command's environment; nil means os.Environ().
	Env []string
	// Dir is the working directory; "" means the current directory.
	Dir string
	// Stdin, Stdout and Stderr are given to the command as fds 0, 1 and 2;
	// nil means /dev/null.
	Stdin, Stdout, Stderr *os.File
	// ExtraFiles are more open files for the command, like os/exec's: entry
	// i becomes fd 3+i (no entry may be nil). Every other fd above 2 is
	// closed in the command. Cmd does not close them.
	ExtraFiles []*os.File
	// Runner is the binary re-executed as the runner: any binary that
	// links this package. "" means this executable (/proc/self/exe).
	Runner string
	// LandlockABI, when positive, caps the Landlock ABI the sandbox uses
	// (0: the kernel's): the command is confined as on an older kernel,
	// with every compensation and every missing guarantee that kernel
	// gets. It never removes Landlock; it cannot raise the kernel's ABI.
	LandlockABI int
	// Proxy is the egress proxy a policy with a network allowlist reaches
	// the network through (shared by many commands, see EgressProxy); nil
	// gives the command one of its own, closed when it ends.
	Proxy *EgressProxy
	// Transaction, when not nil, runs the command in that transaction
	// (package transaction): it sees the policy's workspace through an
	// overlay whose upper layer is the transaction's, so that what it
	// writes there lands in the transaction and the workspace stays as it
	// was until the transaction is committed (read-only sees its changes
	// and makes none). It needs a confined mode with the transaction's
	// workspace, and a mount view; a host
	// without one (or without overlayfs in a user namespace, before Linux
	// 5.11) fails Start with ErrTransactionUnavailable. Every other
	// guarantee holds inside it; the Result's Changes are then the
	// transaction's, read from its upper layer.
	Transaction *transaction.Tx
	// AuditSkip are protected paths the caller itself writes while the
	// command runs (an executor's spill directory): the post-run audit
	// leaves them alone.
	AuditSkip []string
	// AuditCache, when not nil, keeps what the post-run audit read of the
	// writable roots' directories from one command to the next (one serves
	// many commands, at once or in turn; an Executor has one): a command's
	// audit then lists only the directories that changed since, not every
	// directory of the workspace. Each record checks itself against the
	// directory's change time, or, in a cache that watches, against what
	// the kernel reported of the directory since: a stale one costs a read,
	// never a miss.
	AuditCache *AuditCache
	// Namespaces, when not nil, keeps the namespaces commands of one mode
	// and network share (see NamespaceCache; an Executor has one): the
	// command's runner is forked in them instead of making its own user,
	// UTS and net namespaces, so that it starts faster and shares its
	// loopback with those commands.
	Namespaces *NamespaceCache
	// Rulesets, when not nil, keeps the Landlock rulesets' derivations
	// (one serves many commands, at once or in turn; an Executor has one):
	// a command whose policy, ABI and options are those of a kept
	// derivation builds its ruleset from those rules instead of deriving
	// them again, while every path they were made from is what it was
	// (checked on each use: a stat per path, a poll of the mount table;
	// see RulesetCache).
	Rulesets *RulesetCache

	// cmdState is the started command's state, per platform (off Linux,
	// Start only returns ErrUnsupported).
	cmdState
}

// Run starts c and waits for it.
func (c *Cmd) Run() (*Result, error) {
	if err := c.Start(); err != nil {
		return nil, err
	}
	return c.Wait()
}
