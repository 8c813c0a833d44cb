package sandbox

import (
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/changes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Facts are what the sandbox saw of one command: how it was confined, what
// it refused, what it changed and what it used. Result, RunResult and the
// CLI's report carry the same Facts under the same names.
type Facts struct {
	// Mode is the mode the command actually ran under.
	Mode modes.Mode `json:"mode"`
	// Enforcement is how the command was confined (level none for
	// danger-full-access).
	Enforcement Enforcement `json:"enforcement"`
	// Denied is true iff the supervisor recorded a denial (a resource
	// limit hit, op "limit", is not one).
	Denied bool `json:"denied"`
	// Denials are the facts the supervisor recorded, in first-seen order:
	// at most MaxDenials distinct ones.
	Denials []Denial `json:"denials"`
	// DenialsDropped counts the denied calls left out of Denials because
	// MaxDenials distinct ones were already kept.
	DenialsDropped int `json:"denialsDropped"`
	// Changes are the paths in the writable roots the command created,
	// modified, removed, renamed or changed the mode of, in the order it
	// first named them (at most MaxChanges; confined modes with the
	// supervisor only, see Change for what can be missed).
	Changes []Change `json:"changes"`
	// ChangesDropped counts the changes left out of Changes.
	ChangesDropped int `json:"changesDropped"`
	// Usage is what the command used, where a cgroup of its own measured
	// it (nil otherwise); limits it hit are Denials with op "limit".
	Usage *Usage `json:"usage,omitempty"`
	// RunnerFailed (the contract's runnerFailed): the runner was lost
	// after the command started, killed from outside by a signal Kill did
	// not send, or failing; RunnerFailure says why. The command's session
	// was killed with it, and the exit code is the runner's death signal,
	// or 125 when nothing is known. (A runner that cannot confine before
	// the command starts is an error, never a result.)
	RunnerFailed  bool   `json:"runnerFailed,omitempty"`
	RunnerFailure string `json:"runnerFailure,omitempty"`
}

// Denial is one fact the supervisor observed: the sandbox refused Op on Path
// (a filesystem path or pathname unix socket) or Address (an address family,
// an abstract unix socket "@name", or a terminal ioctl), Count times. Its
// methods Target and Line render it.
type Denial = facts.Denial

// MaxDenials is how many distinct denials (op, path, address) a command's
// facts keep; the denied calls beyond them are only counted
// (Result.DenialsDropped), so a command denied on millions of distinct paths
// cannot grow the supervisor's memory or the report without bound.
const MaxDenials = facts.MaxDenials

// OpLimit is the op of a resource-limit fact (a limit the command hit, not
// a denial: it does not set Facts.Denied).
const OpLimit = facts.OpLimit

// SyscallProxy is the Syscall of a denial the egress proxy made: a
// destination a command asked the proxy for that the allowlist refuses.
const SyscallProxy = facts.SyscallProxy

// OpResolve and SyscallDNS name a denial of the stub resolver of a
// command's net namespace: a name the allowlist refuses, looked up.
const (
	OpResolve  = facts.OpResolve
	SyscallDNS = facts.SyscallDNS
)

// Change is one path in the writable roots a command changed: Op created,
// modified, removed, renamed (From is the old path) or mode (only the
// permission bits), with what Path is at the end (Type, Size of a file,
// Mode). The supervisor records the state of each path the first time an
// allowed write-like call names it, before the call runs, and compares it
// with the path's state once the command's processes are gone: no scan of
// the workspace. It cannot see writes through a descriptor the command did
// not open itself (an inherited one), the entries of a directory renamed
// or removed as a whole (the directory is reported), a chmod of a path no
// write-like call named, or a rewrite that keeps the size and the
// modification time. Only the confined modes, with the supervisor, report
// changes; danger-full-access reports none.
type Change = changes.Change

// MaxChanges is how many changes a result lists; the rest are counted
// (Result.ChangesDropped).
const MaxChanges = changes.MaxChanges

// Ops of a Change.
const (
	ChangeCreated  = changes.OpCreated
	ChangeModified = changes.OpModified
	ChangeRemoved  = changes.OpRemoved
	ChangeRenamed  = changes.OpRenamed
	ChangeMode     = changes.OpMode
)
