//go:build linux

package resolve

import (
	"bufio"
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

// Target is a process stopped in a notified system call, seen from the
// supervisor: its host pid, and the sandbox's root directory (which resolves
// through the sandbox's mount namespace). Every process of a sandbox has the
// same root — chroot, pivot_root, mount and unshare are denied — so the
// notifier opens it once.
type Target struct {
	PID    int
	nspid  int // its pid inside its own pid namespace; 0 until needed
	RootFD int
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
	link := fmt.Sprintf("/proc/%d/cwd", t.PID)
	if dirfd != unix.AT_FDCWD {
		link = fmt.Sprintf("/proc/%d/fd/%d", t.PID, dirfd)
	}
	s, err := os.Readlink(link)
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
		dest, err := readlinkat(t.RootFD, Rel(next))
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(next, "/proc/") && !strings.HasPrefix(dest, "/") && strings.Contains(dest, ":") {
			return "", errUnsure // pipe:[…], socket:[…], anon_inode:…
		}
		if strings.HasSuffix(dest, " (deleted)") {
			return "", errUnsure
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

func readlinkat(dirfd int, p string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, p, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// ReadString reads a NUL-terminated string of at most max bytes from the
// target's memory at addr.
func ReadString(pid int, addr uint64, max int) (string, error) {
	if addr == 0 {
		return "", unix.EFAULT
	}
	var out []byte
	const page = 4096
	for len(out) < max {
		n := page - int(addr%page)
		if len(out)+n > max {
			n = max - len(out)
		}
		buf := make([]byte, n)
		got, err := unix.ProcessVMReadv(pid, []unix.Iovec{{Base: &buf[0], Len: uint64(n)}},
			[]unix.RemoteIovec{{Base: uintptr(addr), Len: n}}, 0)
		if err != nil {
			return "", err
		}
		buf = buf[:got]
		if i := indexByte(buf, 0); i >= 0 {
			return string(append(out, buf[:i]...)), nil
		}
		out = append(out, buf...)
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

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
