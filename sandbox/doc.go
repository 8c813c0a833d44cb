// Package sandbox runs commands confined by a [modes.Policy].
//
// [Cmd] is one confined process, shaped like os/exec: Start, Wait, Run. Its
// [Result] carries the [Facts] of the run: how it was confined, what was
// denied, what changed. [ProbeWith] says what this host can enforce. A
// harness that runs `bash -c` commands for a model links package
// sandbox/executor, which is built on Cmd.
//
// # Process model
//
// A supervisor — [Cmd], in dsh-sandbox-run or in a harness linking this
// package — prepares everything that is policy: the Landlock ruleset (built
// in the kernel, passed to the runner as an fd), the seccomp BPF program and
// the mount plan — and begins the post-run audit's start walk, which, where
// the supervisor sees every change the command can make, runs beside what
// follows, the command's first such call waiting for it. It starts the
// runner first, the same binary re-executed as "dsh-sandbox-runner", and
// sends it the spec in two parts: what needs only the mode at once (the
// cgroup, the namespaces), so that the runner makes them while the
// supervisor prepares the rest, then the whole spec. With a [NamespaceCache]
// (Cmd.Namespaces; an Executor's) the runner is instead forked, as this
// process's child, by a session runner that made the user, UTS and net
// namespaces once for the commands of one policy.
// The runner is C code run from an ELF constructor
// (sandbox/internal/runner, runner_*_linux.c), before the Go runtime starts;
// this package imports it, so any binary linking this package is its own
// runner and a command costs no second Go start. In a fixed order it:
//
//  0. joins the command's cgroup itself where the spec's first part came
//     with its v1 tasks files (before it forks or unshares anything); then
//     creates
//     user, mount, ipc, uts, pid and (without network) net
//     namespaces where the host allows them; with a pid namespace its child
//     becomes the namespace's init and does the rest;
//  1. builds the mount view: root recursively read-only, writable roots
//     bound read-write, protected paths bound read-only with their ancestors
//     pinned, a fresh /proc;
//  2. drops every capability (bounding, ambient, effective, permitted,
//     inheritable);
//  3. sets no_new_privs;
//  4. enforces the Landlock ruleset and self-tests it;
//  5. loads the seccomp filter in the command's process, sends its
//     user-notification listener to the supervisor (SCM_RIGHTS, from a
//     helper outside the filter), self-tests it;
//  6. (first thing, in fact) marks every fd above 2 close-on-exec;
//  7. starts the command in a new session.
//
// It then stays as the command's init: it forwards signals to the command's
// process group, reaps orphans, and when the command's main process ends it
// kills whatever is left and reports the exit status. If the supervisor
// dies, the control socket closes and the runner kills the tree.
//
// The supervisor answers seccomp notifications: it pre-denies what the policy
// forbids with the errno Landlock would give and records each as a [Denial]
// fact; Landlock, the mount view and seccomp errno rules remain the
// enforcement. connect(), sendto(), sendmsg() and sendmmsg() on unix sockets
// are performed by the supervisor itself after checking the destination. A confined mode needs seccomp
// and at least one filesystem layer (Landlock or the mount view); without
// them it fails closed with a [*SetupError] and the command never runs.
//
// # Packages
//
// This package is the Cmd layer and the wiring; sandbox/executor, above it,
// is the harness API. The jobs below it are
// internal packages, each with a doc.go saying what it owns and what it must
// never do: sandbox/internal/runner (the C runner, the control protocol, the
// runner's process tree), sandbox/internal/supervisor (the notification
// loop), sandbox/internal/mountplan (the mount view's plan),
// sandbox/internal/resolve (paths and memory of a notified process),
// sandbox/internal/proc (/proc/PID/stat, pidfd liveness),
// sandbox/internal/facts ([Denial] and the fact log) and
// sandbox/internal/audit (the post-run audit of git control entries and protected paths). Calls go one way, down:
// sandbox, then runner, supervisor and audit, then resolve, proc, facts and
// mountplan, then sandbox/landlock, sandbox/seccomp and sandbox/modes.
//
// # Platforms
//
// The sandbox confines on Linux only. The package compiles everywhere, with
// the same shared types ([Result], [Facts], [Denial], [ProbeReport],
// modes.Policy, ...), so that a cross-platform harness can link it: off
// Linux, [Cmd.Start] returns a [*SetupError] wrapping [ErrUnsupported], and
// [ProbeWith] a report that is not Confined, with its message as every
// mode's error.
//
// docs/DESIGN.md has the threat model and the layer-by-layer coverage.
package sandbox
