//go:build linux

package supervisor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/mountplan"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/resolve"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// Changes of metadata — mode, owner, times, extended attributes, inode
// flags — need no Landlock right: Landlock has none for them. With a mount
// view every file outside the writable roots, and every protected path, is
// on a read-only mount, and the kernel refuses them (EROFS). Without one the
// filter routes them all here (seccomp.Spec.Metadata) and the supervisor
// performs them itself, never lets them continue: a continued call could be
// raced (the command changes the path, or dup2s another file onto the
// descriptor, after the check).
//
//   - By path (chmod, chown, lchown, utime, utimes, setxattr, lsetxattr,
//     removexattr, lremovexattr, and the *at forms): the path is read once
//     and resolved through the sandbox's root, following a final symlink
//     exactly when the call would, into a canonical path. The restricted
//     thread (restricted_linux.go: the command's identity, no capabilities,
//     so the path walk's permission checks are the command's) opens that
//     path under the root with RESOLVE_IN_ROOT|RESOLVE_NO_SYMLINKS|
//     RESOLVE_NO_MAGICLINKS and O_PATH|O_NOFOLLOW — the very inode the
//     canonical path names, or a symlink itself for the calls that do not
//     follow one —, the canonical path is judged, and the call is applied
//     to that descriptor, through /proc/thread-self/fd/N (which acts on the
//     inode of N, a symlink included) or AT_EMPTY_PATH, on the same thread:
//     the kernel checks ownership and permissions as for the command.
//   - By descriptor (fchmod, fchown, fsetxattr, fremovexattr, utimensat
//     with a NULL path, futimesat with a NULL path, the AT_EMPTY_PATH forms,
//     the inode-flag ioctls): the inode behind the command's descriptor is
//     judged by its path (readlink of /proc/PID/fd/N), reopened under the
//     root the same way and compared (device, inode) with the inode the magic
//     link leads to; a mismatch (a rename in between, a path the root does
//     not reach) is refused. A descriptor that no path reaches is harmless
//     when the inode is the command's alone: a pipe or a socket (the pipe's
//     own inode, checked once more after it is opened), a deleted file no
//     other name links (st_nlink 0: an O_TMPFILE, a memfd, an unlinked
//     temporary file). A deleted file that still has links elsewhere, and an
//     anonymous inode (shared by the whole system; current kernels refuse
//     them), are refused. An O_PATH descriptor gets EBADF where the kernel
//     gives it (every by-descriptor call but the AT_EMPTY_PATH ones).
//
// Allowed are the files inside the writable roots that are neither a
// protected path nor a deny-read secret (nor a device sink: chmod of
// /dev/null is not the command's to make); everything else is refused with
// the errno a mount view gives — EROFS, or ENOENT beneath a hidden directory
// — and a denial fact (op "chmod", "chown", "utimes", "setxattr", "chattr").
// A global /proc entry (which root owns, and whose mode is the host's) is
// refused too; the command's own /proc/PID entries are the kernel's to
// refuse. An allowed change is recorded for the change facts first.
//
// setxattrat, removexattrat (6.13) and file_setattr (6.17) keep their
// target behind flags in memory: the filter answers ENOSYS, and libc and
// tools fall back to the calls above. FS_IOC_ENABLE_VERITY reads its
// arguments through pointers the supervisor does not follow: allowed files
// get EOPNOTSUPP (as a filesystem without verity would answer).

// metaKind is what a metadata call changes.
type metaKind int

const (
	metaChmod metaKind = iota + 1
	metaChown
	metaUtimes
	metaSetxattr
	metaRemovexattr
	metaIoctl
)

// metaCall is one metadata change, decoded from its registers and read
// once from the command's memory.
type metaCall struct {
	kind metaKind
	// The target: the file of descriptor fd when byFD, else path (as the
	// command wrote it), relative to directory descriptor fd; follow: a
	// final symlink is followed.
	byFD   bool
	fd     int32
	path   string
	follow bool
	// emptyPath: by descriptor through AT_EMPTY_PATH (or a magic link),
	// which takes an O_PATH descriptor; the other descriptor calls give
	// EBADF for one.
	emptyPath bool
	mode      uint32
	uid, gid  uint32            // as the command names them; ^0: unchanged
	times     *[2]unix.Timespec // nil: now
	name      string            // xattr name
	value     []byte
	xflags    int
	ioReq     uint64
	ioArg     []byte
}

// Limits the kernel puts on an xattr, checked before anything is read.
const (
	xattrNameMax = 255
	xattrSizeMax = 65536
)

// metaVerdict answers a metadata call (seccomp.KindMeta).
func (n *Notifier) metaVerdict(req *seccomp.Notif, rule seccomp.Rule) verdict {
	if !n.guard.metadata && !setIDChmod(rule.Name, req.Args) {
		// The mount view refuses what lies outside the roots; chmod is
		// routed for the change facts.
		if rule.Op == "chmod" && rule.Name != "fchmod" {
			return n.chmodVerdict(req, rule)
		}
		return allow()
	}
	t, err := n.loopTarget(req)
	if err != nil {
		return verdict{errno: unix.EACCES}
	}
	c, errno := decodeMeta(t, rule.Name, req.Args)
	if errno != 0 {
		return verdict{errno: errno}
	}
	return n.metaApply(req, rule, t, c)
}

// metaIoctl answers an inode-flag ioctl (seccomp.MetaIoctl): with a mount
// view it continues; without one it is emulated like fchmod, its denials
// recorded as op "chattr".
func (n *Notifier) metaIoctl(req *seccomp.Notif, rule seccomp.Rule) verdict {
	if !n.guard.metadata {
		return allow()
	}
	rule.Op = "chattr"
	a := req.Args
	c := metaCall{kind: metaIoctl, byFD: true, fd: int32(a[0]), ioReq: a[1] & 0xffffffff}
	size := 0
	switch c.ioReq {
	case seccomp.FSIocSetFlags, seccomp.FSIocSetVersion:
		size = 4 // an int, whatever the request's declared size
	case seccomp.FSIocFSSetXattr:
		size = 28 // struct fsxattr
	}
	if size > 0 {
		b, err := resolve.ReadBytes(int(req.Pid), a[2], size)
		if err != nil {
			return verdict{errno: unix.EFAULT}
		}
		c.ioArg = b
	}
	t, err := n.loopTarget(req)
	if err != nil {
		return verdict{errno: unix.EACCES}
	}
	return n.metaApply(req, rule, t, c)
}

// decodeMeta reads a metadata call: its registers, and once what they
// point to in the command's memory. A non-zero errno is the answer (what
// the kernel checks before it looks at the file).
func decodeMeta(t *resolve.Target, name string, a [6]uint64) (metaCall, unix.Errno) {
	cwd := int32(unix.AT_FDCWD)
	c := metaCall{fd: cwd, follow: true}
	pathAddr := uint64(0)
	var flags, allowed uint64 // AT_* flags, and those the call takes
	var timesAddr uint64
	timesKind := ""
	switch name {
	case "chmod":
		c.kind, pathAddr, c.mode = metaChmod, a[0], uint32(a[1])
	case "fchmod":
		c.kind, c.byFD, c.fd, c.mode = metaChmod, true, int32(a[0]), uint32(a[1])
	case "fchmodat":
		c.kind, c.fd, pathAddr, c.mode = metaChmod, int32(a[0]), a[1], uint32(a[2])
	case "fchmodat2":
		c.kind, c.fd, pathAddr, c.mode = metaChmod, int32(a[0]), a[1], uint32(a[2])
		flags, allowed = a[3], unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH
	case "chown", "lchown":
		c.kind, pathAddr, c.uid, c.gid, c.follow = metaChown, a[0], uint32(a[1]), uint32(a[2]), name == "chown"
	case "fchown":
		c.kind, c.byFD, c.fd, c.uid, c.gid = metaChown, true, int32(a[0]), uint32(a[1]), uint32(a[2])
	case "fchownat":
		c.kind, c.fd, pathAddr, c.uid, c.gid = metaChown, int32(a[0]), a[1], uint32(a[2]), uint32(a[3])
		flags, allowed = a[4], unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH
	case "utime":
		c.kind, pathAddr, timesAddr, timesKind = metaUtimes, a[0], a[1], "utimbuf"
	case "utimes":
		c.kind, pathAddr, timesAddr, timesKind = metaUtimes, a[0], a[1], "timeval"
	case "futimesat":
		c.kind, c.fd, pathAddr, timesAddr, timesKind = metaUtimes, int32(a[0]), a[1], a[2], "timeval"
		if pathAddr == 0 && c.fd != cwd {
			c.byFD = true // the file of the descriptor
		}
	case "utimensat":
		c.kind, c.fd, pathAddr, timesAddr, timesKind = metaUtimes, int32(a[0]), a[1], a[2], "timespec"
		flags, allowed = a[3], unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH
		if pathAddr == 0 && c.fd != cwd {
			if uint32(flags) != 0 {
				return c, unix.EINVAL
			}
			c.byFD = true // futimens
		}
	case "setxattr", "lsetxattr", "fsetxattr":
		c.kind, c.follow = metaSetxattr, name == "setxattr"
		if name == "fsetxattr" {
			c.byFD, c.fd = true, int32(a[0])
		} else {
			pathAddr = a[0]
		}
		if uint32(a[4])&^(unix.XATTR_CREATE|unix.XATTR_REPLACE) != 0 {
			return c, unix.EINVAL
		}
		c.xflags = int(uint32(a[4]))
		if e := c.readXattrName(t, a[1]); e != 0 {
			return c, e
		}
		size := a[3]
		if size > xattrSizeMax {
			return c, unix.E2BIG
		}
		if size > 0 {
			b, err := resolve.ReadBytes(t.PID, a[2], int(size))
			if err != nil {
				return c, unix.EFAULT
			}
			c.value = b
		}
	case "removexattr", "lremovexattr", "fremovexattr":
		c.kind, c.follow = metaRemovexattr, name == "removexattr"
		if name == "fremovexattr" {
			c.byFD, c.fd = true, int32(a[0])
		} else {
			pathAddr = a[0]
		}
		if e := c.readXattrName(t, a[1]); e != 0 {
			return c, e
		}
	default:
		return c, unix.ENOSYS
	}
	if uint32(flags)&^uint32(allowed) != 0 {
		return c, unix.EINVAL
	}
	if flags&unix.AT_SYMLINK_NOFOLLOW != 0 {
		c.follow = false
	}
	if timesKind != "" {
		if e := c.readTimes(t, timesAddr, timesKind); e != 0 {
			return c, e
		}
	}
	if c.byFD {
		return c, 0
	}
	p, err := t.ReadPath(pathAddr)
	if err != nil {
		return c, errnoOf(err, unix.EFAULT)
	}
	if p == "" {
		if flags&unix.AT_EMPTY_PATH == 0 {
			return c, unix.ENOENT
		}
		if c.fd != cwd {
			c.byFD, c.emptyPath = true, true
			return c, 0
		}
		p = "." // the working directory itself
	}
	c.path = p
	return c, 0
}

// readXattrName reads an xattr name as the kernel does (ERANGE for an
// empty or too long one).
func (c *metaCall) readXattrName(t *resolve.Target, addr uint64) unix.Errno {
	s, err := t.ReadPath(addr)
	switch {
	case errors.Is(err, unix.ENAMETOOLONG):
		return unix.ERANGE
	case err != nil:
		return unix.EFAULT
	case s == "" || len(s) > xattrNameMax:
		return unix.ERANGE
	}
	c.name = s
	return 0
}

// readTimes reads the times of utime (struct utimbuf), utimes and
// futimesat (struct timeval[2]) or utimensat (struct timespec[2]) as
// timespecs, checked as the kernel checks them; a NULL pointer is now.
func (c *metaCall) readTimes(t *resolve.Target, addr uint64, kind string) unix.Errno {
	if addr == 0 {
		return 0
	}
	size := 32
	if kind == "utimbuf" {
		size = 16
	}
	b, err := resolve.ReadBytes(t.PID, addr, size)
	if err != nil {
		return unix.EFAULT
	}
	le := binary.LittleEndian
	word := func(i int) int64 { return int64(le.Uint64(b[8*i:])) }
	var ts [2]unix.Timespec
	switch kind {
	case "utimbuf":
		ts[0], ts[1] = unix.Timespec{Sec: word(0)}, unix.Timespec{Sec: word(1)}
	case "timeval":
		for i := range ts {
			usec := word(2*i + 1)
			if usec < 0 || usec >= 1_000_000 {
				return unix.EINVAL
			}
			ts[i] = unix.Timespec{Sec: word(2 * i), Nsec: usec * 1000}
		}
	default:
		for i := range ts {
			ts[i] = unix.Timespec{Sec: word(2 * i), Nsec: word(2*i + 1)}
			if ns := ts[i].Nsec; ns != unix.UTIME_NOW && ns != unix.UTIME_OMIT && (ns < 0 || ns >= 1_000_000_000) {
				return unix.EINVAL
			}
		}
	}
	c.times = &ts
	return 0
}

// metaApply finds the target of c, judges it, and performs c on it on the
// restricted thread.
func (n *Notifier) metaApply(req *seccomp.Notif, rule seccomp.Rule, t *resolve.Target, c metaCall) verdict {
	canon, pin := "", -1
	if !c.byFD {
		r, err := t.Resolve(c.fd, c.path, c.follow)
		var fe *resolve.FDError
		switch {
		case errors.As(err, &fe) && fe.Own:
			// A magic link of the command's own descriptor to what has no
			// path (a pipe, a deleted file): that descriptor.
			c.byFD, c.fd, c.emptyPath = true, int32(fe.FD), true
		case resolve.Unsure(err):
			// Another process's descriptor, a deleted working directory:
			// nothing to judge it by.
			return n.deny(rule, unix.EACCES, c.path, "")
		case err != nil:
			return errnoVerdict(err, 0) // ENOENT, ENOTDIR, ELOOP...: as the kernel
		default:
			canon = r
		}
	}
	if c.byFD {
		var v verdict
		var ok bool
		if pin, canon, v, ok = n.fdTarget(req, rule, t, c); !ok {
			return v
		}
		defer unix.Close(pin)
	}
	if !seccomp.Valid(n.fd, req.ID) {
		return verdict{abandon: true} // what was read may be another process's
	}
	// An id the command's user namespace does not map is EINVAL, after
	// the mount view's EROFS (as the kernel orders them).
	ids, idErr := n.metaIDs(req, c)
	rootfd := t.RootFD
	var refused unix.Errno
	stripped := false
	err := n.restricted.do(false, 0, -1, func() error {
		fd := pin
		if fd < 0 {
			// On this thread: the walk's permission checks are the
			// command's.
			p, err := unix.Openat2(rootfd, resolve.Rel(canon), &unix.OpenHow{
				Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
				Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
			})
			if err != nil {
				return err
			}
			defer unix.Close(p)
			fd = p
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if !c.byFD && c.follow && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return unix.ELOOP // the path changed since it was resolved
		}
		if c.kind == metaIoctl && st.Mode&unix.S_IFMT != unix.S_IFREG && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return unix.ENOTTY
		}
		if canon != "" {
			if refused = n.metaRefuses(canon); refused != 0 {
				return nil
			}
		}
		if idErr != 0 {
			return idErr
		}
		if canon != "" {
			n.changes.Touch(rootfd, canon)
		}
		if c.kind == metaChmod {
			stripped = stripSetID(&c.mode, st.Mode)
		}
		return c.apply(fd, ids)
	})
	if refused != 0 {
		return n.deny(rule, refused, canon, "")
	}
	v := errnoVerdict(err, 0)
	if err == nil && stripped {
		v.fact = setIDFact(rule, canon)
	}
	return v
}

// metaRefuses returns the errno a mount view would give a change of the
// metadata of canonical path p, or 0 when the command may change it.
func (n *Notifier) metaRefuses(p string) unix.Errno {
	switch {
	case p == "/proc" || mountplan.ProcGlobal(p):
		return unix.EROFS // bound read-only by the mount view
	case modes.Within(p, "/proc"):
		return 0 // a process's own entries: the kernel's to refuse
	case n.masks(p) && !slices.Contains(n.policy.DenyRead, p):
		return unix.ENOENT // beneath a hidden directory (an empty tmpfs)
	case n.masks(p), n.policy.IsDevice(p), !n.policy.Writable(p):
		return unix.EROFS
	}
	return 0
}

// masks reports whether p is hidden by a deny-read path and not within a
// writable root beneath one (a toolchain cache's upper layer in the
// sandbox's state directory, written directly without a mount view: its
// Landlock rule grants what the mask takes away).
func (n *Notifier) masks(p string) bool {
	if !n.policy.Masks(p) {
		return false
	}
	for _, r := range n.policy.WritableRoots {
		if modes.Within(p, r) && n.policy.Masks(r) {
			return false
		}
	}
	return true
}

// fdTarget pins the file behind the command's descriptor c.fd (see above):
// pin, an O_PATH descriptor of the supervisor's, and canon, its canonical
// path ("" for an inode no path reaches). ok is false when v answers.
func (n *Notifier) fdTarget(req *seccomp.Notif, rule seccomp.Rule, t *resolve.Target, c metaCall) (pin int, canon string, v verdict, ok bool) {
	if c.fd < 0 {
		return -1, "", verdict{errno: unix.EBADF}, false
	}
	magic := "/proc/" + strconv.Itoa(int(req.Pid)) + "/fd/" + strconv.Itoa(int(c.fd))
	link, err := os.Readlink(magic)
	if err != nil {
		return -1, "", verdict{errno: unix.EBADF}, false
	}
	if !c.emptyPath {
		fl, err := fdFlags(int(req.Pid), int(c.fd))
		if err != nil || fl&unix.O_PATH != 0 {
			return -1, "", verdict{errno: unix.EBADF}, false
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(magic, &st); err != nil {
		return -1, "", verdict{errno: unix.EBADF}, false
	}
	same := func(fd int) bool {
		var s unix.Stat_t
		return unix.Fstat(fd, &s) == nil && s.Dev == st.Dev && s.Ino == st.Ino
	}
	deleted := strings.HasSuffix(link, " (deleted)")
	switch {
	case strings.HasPrefix(link, "/") && !deleted:
		canon = path.Clean(link)
		pin, err = unix.Openat2(t.RootFD, resolve.Rel(canon), &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err == nil && same(pin) {
			return pin, canon, verdict{}, true
		}
		if err == nil {
			unix.Close(pin)
		}
		// Not the file at that path (any more): nothing to judge it by.
		return -1, "", n.deny(rule, unix.EACCES, canon, ""), false
	case deleted && strings.HasPrefix(link, "/") && st.Nlink > 0:
		// Unlinked here, linked elsewhere: where is not known.
		return -1, "", n.deny(rule, unix.EROFS, strings.TrimSuffix(link, " (deleted)"), ""), false
	case deleted, strings.HasPrefix(link, "pipe:["), strings.HasPrefix(link, "socket:["):
		// The command's alone: reopened through its magic link (O_PATH
		// waits for nothing), and checked to be that very inode.
		pin, err = unix.Open(magic, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, "", verdict{errno: unix.EBADF}, false
		}
		var s unix.Stat_t
		own := unix.Fstat(pin, &s) == nil && s.Dev == st.Dev && s.Ino == st.Ino
		if own && deleted {
			own = s.Nlink == 0
		} else if own {
			l, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(pin))
			own = err == nil && l == link
		}
		if !own {
			unix.Close(pin)
			return -1, "", verdict{errno: unix.EBADF}, false // swapped meanwhile
		}
		return pin, "", verdict{}, true
	}
	// An anonymous inode (eventfd, epoll, ...): one inode for the whole
	// system, whose metadata is not the command's to change.
	return -1, "", verdict{errno: unix.EOPNOTSUPP}, false
}

// fdFlags reads the open flags of descriptor fd of task tid.
func fdFlags(tid, fd int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", tid, fd))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "flags:"); ok {
			f, err := strconv.ParseUint(strings.TrimSpace(rest), 8, 32)
			return int(f), err
		}
	}
	return 0, unix.EINVAL
}

// metaIDs returns c's owner and group as the supervisor names them: the
// command's user namespace maps them (an id it does not map is EINVAL, as
// for the command); ^0 stays "unchanged".
func (n *Notifier) metaIDs(req *seccomp.Notif, c metaCall) ([2]int, unix.Errno) {
	ids := [2]int{-1, -1}
	if c.kind != metaChown {
		return ids, 0
	}
	for i, id := range []uint32{c.uid, c.gid} {
		if id == ^uint32(0) {
			continue
		}
		m, err := n.idMap(req, i == 1)
		if err != nil {
			return ids, unix.EPERM
		}
		out, ok := m.outside(id)
		if !ok {
			return ids, unix.EINVAL
		}
		ids[i] = int(out)
	}
	return ids, 0
}

// idMap is a user namespace's uid_map or gid_map.
type idMap [][3]uint32 // inside, outside, count

func (m idMap) outside(id uint32) (uint32, bool) {
	for _, r := range m {
		if id >= r[0] && uint64(id) < uint64(r[0])+uint64(r[2]) {
			return r[1] + (id - r[0]), true
		}
	}
	return 0, false
}

// idMap reads the sandbox's uid (or gid) map once: every process of the
// sandbox is in the same user namespace (the command cannot make another).
// Read from another user namespace, the map's outside ids are the
// reader's; in the reader's own they would be its parent's, and there no
// id needs mapping.
func (n *Notifier) idMap(req *seccomp.Notif, gid bool) (idMap, error) {
	i := 0
	if gid {
		i = 1
	}
	if n.idMaps[i] != nil {
		return n.idMaps[i], nil
	}
	if sharesNS(int(req.Pid), "user") {
		n.idMaps[i] = idMap{{0, 0, ^uint32(0)}}
		return n.idMaps[i], nil
	}
	file := "uid_map"
	if gid {
		file = "gid_map"
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(req.Pid)) + "/" + file)
	if err != nil {
		return nil, err
	}
	m := idMap{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		var r [3]uint32
		for j := range r {
			v, err := strconv.ParseUint(f[j], 10, 32)
			if err != nil {
				return nil, err
			}
			r[j] = uint32(v)
		}
		m = append(m, r)
	}
	n.idMaps[i] = m
	return m, nil
}

// apply performs c on the file of descriptor fd (an O_PATH descriptor of
// the supervisor's), on the restricted thread; ids are c's owner and group
// (metaIDs).
func (c metaCall) apply(fd int, ids [2]int) error {
	magic := "/proc/thread-self/fd/" + strconv.Itoa(fd)
	switch c.kind {
	case metaChmod:
		return unix.Fchmodat(unix.AT_FDCWD, magic, c.mode, 0)
	case metaChown:
		return unix.Fchownat(fd, "", ids[0], ids[1], unix.AT_EMPTY_PATH)
	case metaUtimes:
		p, err := unix.BytePtrFromString(magic)
		if err != nil {
			return err
		}
		var tp unsafe.Pointer
		if c.times != nil {
			tp = unsafe.Pointer(&c.times[0])
		}
		cwd := unix.AT_FDCWD
		_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(cwd), uintptr(unsafe.Pointer(p)), uintptr(tp), 0, 0, 0)
		if e != 0 {
			return e
		}
		return nil
	case metaSetxattr:
		return unix.Setxattr(magic, c.name, c.value, c.xflags)
	case metaRemovexattr:
		return unix.Removexattr(magic, c.name)
	case metaIoctl:
		if c.ioReq == seccomp.FSIocEnableVerity {
			return unix.EOPNOTSUPP
		}
		// Any open mode will do for these ioctls (the kernel checks the
		// owner); O_NONBLOCK: a lease is broken without waiting.
		f, err := unix.Open(magic, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err == unix.EACCES {
			f, err = unix.Open(magic, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			return err
		}
		defer unix.Close(f)
		var arg unsafe.Pointer
		if len(c.ioArg) > 0 {
			arg = unsafe.Pointer(&c.ioArg[0])
		}
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(f), uintptr(c.ioReq), uintptr(arg))
		if e != 0 {
			return e
		}
		return nil
	}
	return unix.ENOSYS
}

// errnoOf returns err's errno, or def.
func errnoOf(err error, def unix.Errno) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return def
}
