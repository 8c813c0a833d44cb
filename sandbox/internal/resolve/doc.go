// Package resolve reads a process stopped in a notified system call from
// outside: the path an argument names, resolved component by component
// through the process's /proc/PID/root ([Target.Resolve],
// [Target.ResolveEntry]), its memory ([ReadString], [ReadBytes],
// process_vm_readv) and its thread group ([Tgid]).
//
// The supervisor judges a call by what resolve returns. resolve must never
// follow a path through the supervisor's own root (every lookup is relative
// to the target's root fd), never guess (a path it cannot judge from outside,
// a /proc magic link or a deleted file, is an error the caller turns into
// "let the kernel decide"), and never act on what it resolves: beyond the
// target's root (an O_PATH fd, [OpenRoot]) it opens, creates and changes
// nothing for the command. It holds no state beyond one Target.
package resolve
