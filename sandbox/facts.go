package sandbox

import "github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"

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
