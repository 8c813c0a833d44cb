// Package resolve reads a process stopped in a notified system call from
// outside: the path an argument names, resolved through the process's
// /proc/PID/root ([Target.Resolve], [Target.ResolveEntry]) — in one openat2
// that follows no symlink when the path has none, else component by
// component —, its memory ([Target.ReadPath], [ReadBytes], process_vm_readv)
// and its thread group ([Tgid]).
//
// The supervisor judges a call by what resolve returns. resolve must never
// follow a path through the supervisor's own root (every lookup is relative
// to the target's root fd), never guess (a path it cannot judge from outside,
// a /proc magic link or a deleted file, is an error the caller turns into
// "let the kernel decide" — or, for a call it must not continue, into a
// judgement of the descriptor behind the link, [FDError]), and never act on what it resolves: beyond O_PATH
// lookups under the target's root ([OpenRoot]), closed at once, it opens,
// creates and changes nothing for the command. It holds no state beyond one
// Target (which a caller may reuse, [Target.Retarget], to save allocations).
package resolve
