// Package limits owns a command's resource limits: a cgroup of its own
// (v1 or v2, through github.com/opencontainers/cgroups) where the caller can
// create one — root, or a delegated cgroup v2 subtree — limiting pids,
// memory+swap and CPU; its usage (peak memory, CPU time, peak pids) and the
// limits the command hit, read once the command ended; and the kill of
// whatever is left in it before it is removed.
//
// Where no cgroup can be made, the runner sets RLIMIT_NPROC in the command's
// user namespace instead (the spec option this package names); memory and
// CPU then stay unlimited and are reported missing by package sandbox.
//
// It must never block on the command: every cgroup file it reads or writes
// is a small kernel file, and the kill and removal are bounded in time. It
// must never fail a command because limits are unavailable: Create's error
// only tells the caller to fall back. It imports nothing of the sandbox but
// modes.
package limits
