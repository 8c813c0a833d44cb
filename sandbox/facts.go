package sandbox

import (
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/changes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
)

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
