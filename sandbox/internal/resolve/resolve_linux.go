//go:build linux

package resolve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// errUnsure means a path cannot be judged from outside (a /proc magic link,
// an anonymous file): the supervisor lets the kernel decide.
var errUnsure = errors.New("path cannot be resolved from outside")

// Unsure reports whether err says that a path cannot be judged from
// outside (a /proc magic link to what has no path, a deleted working
// directory), an *FDError included.
func Unsure(err error) bool { return errors.Is(err, errUnsure) }

// FDError is the error of a path that ends in a descriptor's magic link
// (/proc/PID/fd/N, /proc/PID/task/TID/fd/N, through /proc/self or
// /dev/fd) to what has no path: a pipe, a socket, an anonymous inode, a
// deleted file. A caller that must not let the kernel decide can judge the
// descriptor instead: FD of the target itself when Own. It unwraps to the
// error of any other path that cannot be judged from outside.
type FDError struct {
	FD  int
	Own bool // the magic link is the target's own (its pid, as /proc/self names it)
}

func (e *FDError) Error() string {
	return fmt.Sprintf("descriptor %d: %v", e.FD, errUnsure)
}

func (e *FDError) Unwrap() error { return errUnsure }

// unsure is the error of next, a magic link whose destination has no path:
// an *FDError when it is the last component of a descriptor's link.
func (t *Target) unsure(next string, last bool) error {
	rest, ok := strings.CutPrefix(next, "/proc/")
	if !last || !ok {
		return errUnsure
	}
	parts := strings.Split(rest, "/")
	if len(parts) == 5 && parts[1] == "task" {
		parts = []string{parts[0], parts[3], parts[4]}
	}
	if len(parts) != 3 || parts[1] != "fd" {
		return errUnsure
	}
	pid, err1 := strconv.Atoi(parts[0])
	fd, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || fd < 0 {
		return errUnsure
	}
	return &FDError{FD: fd, Own: pid == t.selfPID()}
}

// Target is a process stopped in a notified system call, seen from the
// supervisor: its host pid, and the sandbox's root directory (which resolves
// through the sandbox's mount namespace). Every process of a sandbox has the
// same root — chroot, pivot_root, mount and unshare are denied — so the
// notifier opens it once.
type Target struct {
	PID    int
	nspid  int // its pid inside its own pid namespace; 0 until needed
	RootFD int
	// buf is scratch space for reading the target's memory and links,
	// allocated on first use and kept by a Target that is reused
	// (Retarget): a notified call then allocates almost nothing.
	buf []byte
}

// Retarget makes t a view of process pid, keeping its root and buffer.
func (t *Target) Retarget(pid int) {
	t.PID, t.nspid = pid, 0
}

func (t *Target) scratch() []byte {
	if t.buf == nil {
		t.buf = make([]byte, unix.PathMax)
	}
	return t.buf
}

// OpenRoot opens the root directory of process pid.
func OpenRoot(pid int) (int, error) {
	return unix.Open(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// selfPID returns the target's pid as its own /proc/self names it.
func (t *Target) selfPID() int {
	if t.nspid == 0 {
		t.nspid = nsPID(t.PID)
	}
	return t.nspid
}

// nsPID returns the innermost pid of host pid (the last NSpid field).
func nsPID(pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return pid
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "NSpid:"); ok {
			fs := strings.Fields(rest)
			if len(fs) > 0 {
				if n, err := strconv.Atoi(fs[len(fs)-1]); err == nil {
					return n
				}
			}
		}
	}
	return pid
}

// Tgid returns the thread-group id of host task id tid.
func Tgid(tid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return tid
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Tgid:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
				return n
			}
		}
	}
	return tid
}

// base returns the directory a relative path of the target is resolved
// against: its cwd for AT_FDCWD, else the directory open as dirfd.
func (t *Target) base(dirfd int32) (string, error) {
	var lb [48]byte
	link := strconv.AppendInt(append(lb[:0], "/proc/"...), int64(t.PID), 10)
	if dirfd == unix.AT_FDCWD {
		link = append(link, "/cwd"...)
	} else {
		link = strconv.AppendInt(append(link, "/fd/"...), int64(dirfd), 10)
	}
	s, err := t.readlinkat(unix.AT_FDCWD, string(link))
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(s, "/") || strings.HasSuffix(s, " (deleted)") {
		return "", errUnsure
	}
	return s, nil
}

// Resolve returns the canonical path (no symlinks, no . or ..) that p names
// for the target, resolving every component through the target's root.
// With follow, a symlink in the last component is followed. A missing last
// component is allowed (the caller may be creating it); a missing earlier
// one yields ENOENT.
//
// A path without symlinks or ".." outside /proc — nearly every path a
// command writes — is checked by one openat2 of it (or of its parent) under
// the root with RESOLVE_NO_SYMLINKS: when that succeeds, the path as written
// is canonical. Anything else is walked a component at a time.
func (t *Target) Resolve(dirfd int32, p string, follow bool) (string, error) {
	if p == "" {
		return "", unix.ENOENT
	}
	if !strings.HasPrefix(p, "/") {
		b, err := t.base(dirfd)
		if err != nil {
			return "", err
		}
		p = b + "/" + p
	}
	if r, ok := t.direct(p, follow); ok {
		return r, nil
	}
	return t.walk(p, follow)
}

// direct resolves absolute path p in the kernel, in one or two openat2
// calls that follow no symlink, and reports whether that settled it: ok is
// false for a path with a ".." component or under /proc (where /proc/self
// and magic links need the walk), and whenever the kernel met a symlink or
// failed for any reason — the walk then decides, as it always did.
func (t *Target) direct(p string, follow bool) (string, bool) {
	if hasDotDot(p) {
		return "", false
	}
	clean := path.Clean(p)
	if clean == "/proc" || strings.HasPrefix(clean, "/proc/") {
		return "", false
	}
	if clean == "/" {
		return clean, true
	}
	if follow {
		switch err := t.lookup(clean, 0); {
		case err == nil:
			return clean, true // no component is a symlink
		case err != unix.ENOENT:
			return "", false // a symlink (ELOOP), or something for the walk
		}
		// ENOENT: a missing last component is fine, a missing parent
		// is for the walk to report.
	}
	if err := t.lookup(path.Dir(clean), unix.O_DIRECTORY); err != nil {
		return "", false
	}
	return clean, true
}

// lookup resolves clean absolute path p under the root without following
// any symlink (an O_PATH open, closed at once: nothing is opened for real).
func (t *Target) lookup(p string, flags uint64) error {
	fd, err := unix.Openat2(t.RootFD, Rel(p), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | flags,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

// hasDotDot reports whether p has a ".." component.
func hasDotDot(p string) bool {
	for {
		i := strings.Index(p, "..")
		if i < 0 {
			return false
		}
		if (i == 0 || p[i-1] == '/') && (i+2 == len(p) || p[i+2] == '/') {
			return true
		}
		p = p[i+2:]
	}
}

// walk resolves absolute path p a component at a time: a stat of each, a
// readlink of each symlink, /proc/self mapped to the target's own pid.
func (t *Target) walk(p string, follow bool) (string, error) {
	comps := strings.Split(p, "/")
	cur := "/"
	links := 0
	for i := 0; i < len(comps); i++ {
		c := comps[i]
		if c == "" || c == "." {
			continue
		}
		if c == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		if next == "/proc/self" || next == "/proc/thread-self" {
			next = "/proc/" + strconv.Itoa(t.selfPID())
		}
		last := isLast(comps, i)
		if last && !follow {
			return next, nil
		}
		var st unix.Stat_t
		if err := unix.Fstatat(t.RootFD, Rel(next), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) && last {
				return next, nil
			}
			return "", err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			cur = next
			continue
		}
		if links++; links > 40 {
			return "", unix.ELOOP
		}
		dest, err := t.readlinkat(t.RootFD, Rel(next))
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(next, "/proc/") && !strings.HasPrefix(dest, "/") && strings.Contains(dest, ":") {
			return "", t.unsure(next, last) // pipe:[…], socket:[…], anon_inode:…
		}
		if strings.HasSuffix(dest, " (deleted)") {
			return "", t.unsure(next, last)
		}
		rest := comps[i+1:]
		comps = append(strings.Split(dest, "/"), rest...)
		i = -1
		if strings.HasPrefix(dest, "/") {
			cur = "/"
		}
	}
	return cur, nil
}

func isLast(comps []string, i int) bool {
	for _, c := range comps[i+1:] {
		if c != "" && c != "." {
			return false
		}
	}
	return true
}

// ResolveEntry resolves the parent of p (following symlinks) and appends its
// last component unresolved: the name an unlink/mkdir/rename acts on.
func (t *Target) ResolveEntry(dirfd int32, p string) (string, error) {
	trimmed := strings.TrimRight(p, "/")
	if trimmed == "" {
		return "/", nil
	}
	dir, name := path.Split(trimmed)
	if name == "." || name == ".." {
		return t.Resolve(dirfd, p, true)
	}
	if dir == "" {
		dir = "."
	}
	parent, err := t.Resolve(dirfd, dir, true)
	if err != nil {
		return "", err
	}
	return path.Join(parent, name), nil
}

// Rel names p relative to a root directory fd: "." for "/".
func Rel(p string) string {
	if p == "/" {
		return "."
	}
	return strings.TrimPrefix(p, "/")
}

func (t *Target) readlinkat(dirfd int, p string) (string, error) {
	buf := t.scratch()
	n, err := unix.Readlinkat(dirfd, p, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// ReadPath reads the NUL-terminated path at addr in the target's memory: at
// most PATH_MAX bytes with its NUL, as the kernel takes a path (longer is
// ENAMETOOLONG). It reads a page at a time into the Target's buffer, so a
// path that does not cross a page costs one process_vm_readv.
func (t *Target) ReadPath(addr uint64) (string, error) {
	if addr == 0 {
		return "", unix.EFAULT
	}
	buf := t.scratch()
	const page = 4096
	for have := 0; have < len(buf); {
		n := min(page-int(addr%page), len(buf)-have)
		got, err := unix.ProcessVMReadv(t.PID, []unix.Iovec{{Base: &buf[have], Len: uint64(n)}},
			[]unix.RemoteIovec{{Base: uintptr(addr), Len: n}}, 0)
		if err != nil {
			return "", err
		}
		if i := bytes.IndexByte(buf[have:have+got], 0); i >= 0 {
			return string(buf[:have+i]), nil
		}
		have += got
		addr += uint64(got)
		if got < n {
			return "", unix.EFAULT
		}
	}
	return "", unix.ENAMETOOLONG
}

// ReadBytes reads exactly n bytes of the target's memory at addr.
func ReadBytes(pid int, addr uint64, n int) ([]byte, error) {
	if addr == 0 || n <= 0 {
		return nil, unix.EFAULT
	}
	buf := make([]byte, n)
	got, err := unix.ProcessVMReadv(pid, []unix.Iovec{{Base: &buf[0], Len: uint64(n)}},
		[]unix.RemoteIovec{{Base: uintptr(addr), Len: n}}, 0)
	if err != nil {
		return nil, err
	}
	if got != n {
		return nil, unix.EFAULT
	}
	return buf, nil
}
