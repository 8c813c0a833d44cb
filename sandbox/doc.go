// Package sandbox runs commands confined by a [modes.Policy].
//
// # Process model
//
// A supervisor (dsh-sandbox-run, or a harness linking this package) starts a
// re-exec'd runner: the same binary, recognised by [Init], in new user,
// mount, pid, ipc, uts and (without network) net namespaces where the host
// allows them, and without namespaces where it does not. The runner applies
// the policy in a fixed order, on one locked OS thread:
//
//  1. build the mount view: root recursively read-only, writable roots bound
//     read-write, protected paths bound read-only, their ancestors pinned,
//     a fresh /proc for the pid namespace;
//  2. drop every capability (bounding, ambient, effective, permitted,
//     inheritable);
//  3. set no_new_privs;
//  4. enforce one Landlock ruleset and self-test it;
//  5. load the seccomp filter (all threads), pass its user-notification
//     listener to the supervisor, self-test it;
//  6. mark every fd above 2 close-on-exec;
//  7. start the command in a new session from the restricted thread.
//
// It then stays as a minimal init (pid 1 of the pid namespace, or a child
// subreaper without one): it forwards signals to the command's process group,
// reaps orphans, and when the command's main process ends it kills whatever
// is left and reports the exit status. If the supervisor dies, the runner
// notices the control socket closing and kills the tree.
//
// The supervisor answers seccomp notifications: it pre-denies what the policy
// forbids with the errno Landlock would give and records each as a [Denial]
// fact; Landlock, the mount view and seccomp errno rules remain the
// enforcement. A confined mode needs seccomp and at least one filesystem layer
// (Landlock or the mount view); without them it fails closed with a
// [*SetupError] and the command never runs.
package sandbox
