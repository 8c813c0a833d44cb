//go:build linux

package supervisor

import (
	"path"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/resolve"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Outside the writable roots the sandbox answers a write-like call as the
// kernel answers it on a read-only mount of that path, in the kernel's
// order, so that a program sees what it would see under a read-only bind
// (bubblewrap, a container): Go's build cache, Node's recursive mkdir and
// most tools treat EROFS as "not writable here" and EEXIST as "already
// there", where EACCES stops them. Only EROFS is the sandbox's refusal and
// leaves a fact; EEXIST, ENOENT, ENOTDIR and EISDIR are what the call gets
// without any sandbox, so they are not denials. Inside the roots a
// protected path stays EACCES (there a read-only mount is not what the
// user sees). DAC is not modelled: a file the caller could not write
// anyway reads EROFS, with a fact.
//
// The answer depends on the state of the path when the call is judged; a
// command that changes it in between only changes which failure it gets:
// every outcome here fails the call, except an O_CREAT open without write
// access of a file that exists, which the kernel (Landlock, the read-only
// mount) still judges when it is continued.

// readOnlyAnswer is what call name with open flags flags (open family
// only) gets on a read-only mount of p, a canonical path outside every
// writable root under the command's root rootfd: errno, whether it is the
// sandbox's refusal (a fact), or cont when the kernel would let it through
// on a read-only mount (an O_CREAT open of an existing file, read-only).
// src is the entry a remove or rename acts on (for a rename, its first
// name): the kernel answers EROFS before it looks the entry up, but only a
// call on an entry that exists is one the sandbox refused.
func readOnlyAnswer(rootfd int, name, p, src string, flags uint64) (errno unix.Errno, denial, cont bool) {
	if p != "/" {
		switch st, e := statIn(rootfd, path.Dir(p), true); {
		case e == unix.ENOENT || e == unix.ENOTDIR:
			return e, false, false
		case e == 0 && st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return unix.ENOTDIR, false, false
		}
	}
	switch name {
	case "mkdir", "mkdirat", "mknod", "mknodat", "symlink", "symlinkat", "link", "linkat":
		if _, e := statIn(rootfd, p, false); e == 0 {
			return unix.EEXIST, false, false
		}
	case "unlink", "unlinkat", "rmdir", "rename", "renameat", "renameat2":
		_, e := statIn(rootfd, src, false)
		return unix.EROFS, e == 0, false
	case "open", "openat", "openat2", "creat", "truncate":
		st, e := statIn(rootfd, p, flags&unix.O_NOFOLLOW == 0)
		if e != 0 {
			if name == "truncate" || flags&unix.O_CREAT == 0 {
				return unix.ENOENT, false, false
			}
			break
		}
		if name == "truncate" {
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				return unix.EISDIR, false, false
			}
			break
		}
		if flags&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL {
			return unix.EEXIST, false, false
		}
		acc := flags & unix.O_ACCMODE
		writes := acc == unix.O_WRONLY || acc == unix.O_RDWR || flags&unix.O_TRUNC != 0
		if st.Mode&unix.S_IFMT == unix.S_IFDIR && (writes || flags&unix.O_CREAT != 0) {
			return unix.EISDIR, false, false
		}
		if !writes {
			return 0, false, true
		}
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFDIR {
			// A device, FIFO or socket is opened for writing on a
			// read-only mount; a nodev one refuses a device with
			// EACCES, and so does the sandbox, for all three.
			return unix.EACCES, true, false
		}
	}
	return unix.EROFS, true, false
}

// statIn stats p under rootfd, following no symlink but a final one when
// follow (p is canonical: a symlink on the way means it changed); errno is
// what the lookup met (0: found), ENOENT when it cannot tell.
func statIn(rootfd int, p string, follow bool) (unix.Stat_t, unix.Errno) {
	var st unix.Stat_t
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	if !follow {
		how.Flags |= unix.O_NOFOLLOW
		how.Resolve |= unix.RESOLVE_NO_SYMLINKS
	}
	fd, err := unix.Openat2(rootfd, resolve.Rel(p), &how)
	if err != nil {
		if e, ok := err.(unix.Errno); ok && e == unix.ENOTDIR {
			return st, e
		}
		return st, unix.ENOENT
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return st, unix.ENOENT
	}
	return st, 0
}

// outsideRoots says whether p lies outside every writable root of policy
// p (a protected path inside one does not).
func outsideRoots(pol modes.Policy, p string) bool {
	for _, r := range pol.WritableRoots {
		if modes.Within(p, r) {
			return false
		}
	}
	return true
}
