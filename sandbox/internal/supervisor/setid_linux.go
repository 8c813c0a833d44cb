//go:build linux

package supervisor

import (
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// A confined command never leaves a set-user-ID or set-group-ID file
// behind. Inside the sandbox no_new_privs makes the bits inert, but the
// file outlives the command: a set-user-ID-root executable a root
// command left in a workspace other users can reach is root for them. The
// bits reach a file two ways, both judged from registers only (nothing the
// command can change after the check):
//
//   - a change of mode (chmod, fchmod, fchmodat, fchmodat2) whose mode has
//     them: the filter routes it (fchmod always, with notification), and the
//     supervisor performs it without them (stripSetID: a directory keeps
//     its set-group-ID bit, which only makes new entries inherit its
//     group), with a fact; the call succeeds, as chmod g+s by a non-member
//     does (the kernel drops that bit silently too);
//   - a creation with such a mode (open, openat and creat with O_CREAT or
//     O_TMPFILE, mknod, mknodat): refused with EPERM and a fact
//     (setIDCreate). Programs create with plain modes and chmod after.
//
// openat2 keeps its mode in memory: it answers ENOSYS on every host
// (OpenGuardFor), and callers fall back to openat. Without user
// notification the filter refuses all of the above in the kernel (EPERM).

// setIDBits are the mode bits a command's files never get.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// setIDChmod reports a chmod-family call whose mode register asks for
// set-ID bits.
func setIDChmod(name string, a [6]uint64) bool {
	switch name {
	case "chmod", "fchmod":
		return a[1]&setIDBits != 0
	case "fchmodat", "fchmodat2":
		return a[2]&setIDBits != 0
	}
	return false
}

// stripSetID drops from *mode the set-ID bits a file of type fileMode must
// not get (both for anything but a directory, set-user-ID for a directory)
// and reports whether it dropped any.
func stripSetID(mode *uint32, fileMode uint32) bool {
	drop := uint32(setIDBits)
	if fileMode&unix.S_IFMT == unix.S_IFDIR {
		drop = unix.S_ISUID
	}
	if *mode&drop == 0 {
		return false
	}
	*mode &^= drop
	return true
}

// setIDFact records set-ID bits left out of a change of mode that went
// through.
func setIDFact(rule seccomp.Rule, path string) *facts.Denial {
	return &facts.Denial{Op: "chmod", Path: path, Syscall: rule.Name, Errno: "EPERM", Reason: "set-ID bits not applied"}
}

// setIDCreate refuses a creation whose mode register asks for set-ID bits;
// ok is false for every other call.
func (n *Notifier) setIDCreate(req *seccomp.Notif, rule seccomp.Rule) (v verdict, ok bool) {
	a := req.Args
	var flags, mode uint64
	pathAddr, dirfd := uint64(0), int32(unix.AT_FDCWD)
	switch rule.Name {
	case "open":
		pathAddr, flags, mode = a[0], a[1], a[2]
	case "openat":
		dirfd, pathAddr, flags, mode = int32(a[0]), a[1], a[2], a[3]
	case "creat":
		pathAddr, flags, mode = a[0], unix.O_CREAT, a[1]
	case "mknod":
		pathAddr, flags, mode = a[0], unix.O_CREAT, a[1]
	case "mknodat":
		dirfd, pathAddr, flags, mode = int32(a[0]), a[1], unix.O_CREAT, a[2]
	default:
		return verdict{}, false
	}
	creates := uint32(flags)&unix.O_CREAT != 0 || uint32(flags)&unix.O_TMPFILE == unix.O_TMPFILE
	if !creates || uint32(mode)&setIDBits == 0 {
		return verdict{}, false
	}
	path := ""
	if t, err := n.loopTarget(req); err == nil {
		if p, err := t.ReadPath(pathAddr); err == nil {
			// For the fact only: the refusal does not depend on it.
			if r, err := t.ResolveEntry(dirfd, p); err == nil {
				path = r
			} else {
				path = p
			}
		}
	}
	f := &facts.Denial{Op: "chmod", Path: path, Syscall: rule.Name, Errno: "EPERM", Reason: "set-ID bits not applied"}
	return verdict{errno: unix.EPERM, fact: f}, true
}
