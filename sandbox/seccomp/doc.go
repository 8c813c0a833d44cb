// Package seccomp builds and loads the seccomp filter of a confined command
// and describes, for the supervisor, which system calls reach it through the
// user-notification listener.
//
// The filter allows by default and names what it forbids. Three kinds of
// rule exist (see [Table]):
//
//   - Errno rules deny silently in the kernel: clone3 (ENOSYS, so libc falls
//     back to clone, whose flags can be filtered), io_uring (EPERM), non-unix
//     socketpair (EACCES); without user notification, on a host where no
//     mount view backs Landlock, also open/openat with access mode 3 and
//     (Landlock ABI < 3) truncate and non-writable O_TRUNC opens (EACCES),
//     and openat2 (ENOSYS): see [Spec].
//   - Deny rules route the call to the supervisor, which answers with the
//     listed errno and records a denial fact: ptrace, mount family, namespace
//     creation, keyring, bpf, perf, userfaultfd, kexec, modules, TIOCSTI...
//     If the supervisor is gone the kernel answers ENOSYS: still denied.
//   - Path and socket rules route write-like filesystem calls, non-unix
//     socket(), connect(), sendto() with a destination, sendmsg() and
//     sendmmsg() to the supervisor, which pre-denies what the policy forbids
//     (with Landlock's errno) and lets the rest continue to the kernel, where
//     Landlock and the mount view remain the enforcement. The socket calls
//     are never continued: the supervisor performs them (see package
//     sandbox), because a continued call could be raced.
//   - Metadata rules route changes of mode, owner, times, xattrs and inode
//     flags ([KindMeta]): chmod by path always (for the change facts), the
//     rest only with [Spec].Metadata, for a command that may get no mount
//     view; the supervisor then performs them, never continues them.
//
// Integer arguments are compared under a 32-bit mask, and "deny unless equal"
// rules fail safe against garbage upper bits. Foreign architectures (32-bit
// int 0x80, x32) hit the bad-arch action, which kills the process.
package seccomp
