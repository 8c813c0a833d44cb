// Package supervisor answers the seccomp user notifications of one sandbox:
// the notification loop and its verdicts ([Notifier], notify_linux.go), the
// registers-only open guard ([OpenGuard], [OpenGuardFor]), and the calls it
// judges or performs for the command — bind (bind_linux.go), connect and
// sendto (connect_linux.go), sendmsg and sendmmsg (sendmsg_linux.go), the
// same on a host without pidfd_getfd by replacing the command's sockets
// (replace_linux.go), kill and friends (signal_linux.go), the sched_* calls
// (sched_linux.go), terminal ioctls (terminals_linux.go), changes of
// metadata without a mount view (metadata_linux.go) — the thread restricted
// like the command on which it performs binds and metadata changes
// (restricted_linux.go), and the bound on every emulated call that may wait
// (bounded_linux.go).
//
// Package sandbox needs only [NewNotifier], [Notifier.Run],
// [Notifier.Finish], [Notifier.NoPidfdGetfd], [Notifier.MayHaveChanged] and
// [OpenGuardFor] from it. It reads the target through
// sandbox/internal/resolve, records denials in a sandbox/internal/facts Log,
// and asks sandbox/internal/mountplan which /proc entries are global.
//
// It pre-denies what the policy forbids, with the errno Landlock would give,
// and lets everything else continue to the kernel: Landlock, the mount view
// and the filter's errno rules stay the enforcement, so a verdict here may
// only ever refuse more, never allow what they refuse. What no kernel layer
// covers on a host it is never continued but performed here, on what it
// checked, and only as far as the kernel would let the command: the socket
// calls, and without a mount view the changes of metadata (Landlock has no
// right for them), performed with the command's identity and no
// capabilities. Rules it must keep:
//
//   - It never acts for the command by path once the command runs: a path
//     is resolved once, through the target's root, into what is checked, and
//     what it performs (connect, send, bind, a change of metadata) goes
//     through the descriptor it checked and pinned then (an O_PATH fd opened
//     under the target's root without following any symlink,
//     /proc/thread-self/fd) or the command's own socket taken with
//     pidfd_getfd — or, where the host refuses pidfd_getfd, a socket of its
//     own installed in the command's place (SECCOMP_IOCTL_NOTIF_ADDFD) —,
//     never through the path again. Without a copy it never continues a
//     call whose decision rests on memory or a descriptor number the
//     command can change after the check: it replaces, or refuses. The target's memory is read
//     once; changing it afterwards changes nothing.
//   - It never acts with its own powers: what the kernel must judge as the
//     command's call (bind, a change of metadata) runs on the restricted
//     thread, never on a thread with the supervisor's capabilities.
//   - It never blocks on the command's behalf: no emulated call waits in the
//     kernel, every wait is bounded (short slices, checked against the
//     notification still pending), and a call is abandoned without an answer
//     when its notification is gone (the command was killed or interrupted)
//     or the notifier stops. Finish stops the loop after a bounded wait.
//   - It answers only for processes of its own sandbox: a pid is checked
//     against the notification (or its pidfd) before it is trusted, so a
//     reused pid never hands it another process.
//
// The git audit is not here (sandbox/internal/audit): it handles no
// notification. Its start walk may run beside the command's start; then the
// notifier holds the first call that may change a file until the walk is
// done (Config.FirstCall: the supervisor's own bounded work, not a wait on
// the command's behalf) and reports whether any such call went through
// ([Notifier.MayHaveChanged]).
package supervisor
