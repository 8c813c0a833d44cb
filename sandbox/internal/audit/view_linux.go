//go:build linux

package audit

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// view reads one audited root as the command left it: the root itself, or,
// in a transaction, its upper layer (the top, where every write of the
// command landed) over the root (the lower layer, the workspace as it was).
// Every lookup goes through an os.Root of a layer, never following a final
// symlink; a way through a symlink is refused where it matters (isDir).
type view struct {
	top     *os.Root
	topPath string
	lower   *os.Root // nil outside a transaction
	// abs is the audited root's own path: what git, the command and the
	// pointers git writes name.
	abs string
	// home is the user's home, for a config's "~/" ("": none).
	home string
	// stop, when not nil, is set to abandon a walk of this view (see
	// StartStoppable), which then runs beside the command, on one CPU.
	stop <-chan struct{}
}

// stopped reports whether a walk of v is to be abandoned.
func (v *view) stopped() bool {
	select {
	case <-v.stop:
		return true
	default:
		return false
	}
}

// openView opens the audited root abs, read at at instead when at is not
// "" (a transaction's upper layer).
func openView(abs, at string) (*view, error) {
	v := &view{topPath: abs, abs: abs}
	if at != "" {
		v.topPath = at
	}
	var err error
	if v.top, err = os.OpenRoot(v.topPath); err != nil {
		return nil, err
	}
	if at != "" {
		if v.lower, err = os.OpenRoot(abs); err != nil {
			v.top.Close()
			return nil, err
		}
	}
	if h, err := os.UserHomeDir(); err == nil {
		v.home = h
	}
	return v, nil
}

func (v *view) close() {
	v.top.Close()
	if v.lower != nil {
		v.lower.Close()
	}
}

// lstat returns the entry rel as the command saw it, with the layer that
// holds it: the top, or, under a transaction's upper layer, the lower one
// where the top has nothing on the way (no entry, no whiteout, no opaque
// directory).
func (v *view) lstat(rel string) (os.FileInfo, *os.Root, error) {
	fi, err := v.top.Lstat(rel)
	if v.lower == nil {
		return fi, v.top, err
	}
	if err == nil {
		if st, ok := stampOf(fi); ok && st.whiteout() {
			return nil, nil, &os.PathError{Op: "lstat", Path: rel, Err: syscall.ENOENT}
		}
		return fi, v.top, nil
	}
	if !errors.Is(err, fs.ErrNotExist) || !v.lowerShows(path.Dir(rel)) {
		return nil, nil, err
	}
	fi, err = v.lower.Lstat(rel)
	return fi, v.lower, err
}

// lowerShows reports whether the lower layer's directory dir shows through
// the top: the top holds, at dir and on the way to it, only directories
// that are not opaque, or nothing.
func (v *view) lowerShows(dir string) bool {
	if dir == "." {
		return true
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		fi, err := v.top.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return true // the top has nothing from here on
		}
		if err != nil || !fi.IsDir() {
			return false // a whiteout, a file: lower's is hidden
		}
		f, err := v.top.OpenFile(p, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return false
		}
		o := opaque(int(f.Fd()))
		f.Close()
		if o {
			return false
		}
	}
	return true
}

// merged reports whether the top's directory rel is, in a transaction, a
// directory of the workspace the command changed entries in (a copy of it,
// not opaque) rather than a new one.
func (v *view) merged(rel string) bool {
	return v.lower != nil && v.lowerShows(rel) && v.lowerIsDir(rel)
}

// lowerIsDir reports whether the lower layer holds a directory at rel.
func (v *view) lowerIsDir(rel string) bool {
	fi, err := v.lower.Lstat(rel)
	return err == nil && fi.IsDir()
}

// opaque reports whether the upper layer's directory fd hides the lower
// one's entries (overlayfs's opaque mark, user.* with userxattr).
func opaque(fd int) bool {
	var b [1]byte
	n, err := unix.Fgetxattr(fd, "user.overlay.opaque", b[:])
	return err == nil && n == 1 && b[0] == 'y'
}

// isDir reports whether rel is a directory reached from the root through
// directories only: no symlink, in either layer, on the way or at the end.
func (v *view) isDir(rel string) bool {
	if rel == "." {
		return true
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		fi, _, err := v.lstat(strings.Join(parts[:i+1], "/"))
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// inRoot returns target — absolute, or relative to the directory from
// (relative to the root) — relative to the root, lexically (as named; see
// resolve for where the kernel takes it); false when it lies outside.
func (v *view) inRoot(from, target string) (string, bool) {
	if target == "" {
		return "", false
	}
	if path.IsAbs(target) {
		target = path.Clean(target)
		if !modes.Within(target, v.abs) {
			return "", false
		}
		if target == v.abs {
			return ".", true
		}
		return relTo(v.abs, target), true
	}
	r := path.Join(from, target)
	if r == ".." || strings.HasPrefix(r, "../") {
		return "", false
	}
	return r, true
}

// pathname returns a config's pathname p ("~/" is the home; relative to
// the directory from) as named (inRoot) and as git reaches it (resolve
// with follow), "" for either that is outside the root.
func (v *view) pathname(from, p string) (named, reached string) {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if v.home == "" {
			return "", ""
		}
		p = path.Join(v.home, rest)
	} else if strings.HasPrefix(p, "~") {
		return "", "" // ~user: another user's
	}
	named, _ = v.inRoot(from, p)
	reached, _ = v.resolve(from, p, true)
	return named, reached
}

// resolve returns target — absolute, or relative to the directory from
// (relative to the root) — relative to the root, walked a component at a
// time as the kernel walks it: a ".." goes up from where the walk has got
// to, not from the text before it. A symlink on the way is followed when
// follow is set and it stays inside the root; otherwise it fails the walk,
// as does anything but a directory before the last component. A missing
// component ends the walk with follow (the rest is taken as named:
// protected while it does not exist) and fails it without. false when the
// way leaves the root, or loops.
func (v *view) resolve(from, target string, follow bool) (string, bool) {
	if target == "" {
		return "", false
	}
	cur := from
	if path.IsAbs(target) {
		rest := target
		if v.abs != "/" {
			var ok bool
			if rest, ok = strings.CutPrefix(target, v.abs); !ok || rest != "" && rest[0] != '/' {
				return "", false
			}
		}
		cur, target = ".", rest
	}
	comps := strings.Split(target, "/")
	for hops := 0; len(comps) > 0; {
		c := comps[0]
		comps = comps[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if cur == "." {
				return "", false
			}
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		fi, layer, err := v.lstat(next)
		switch {
		case err != nil:
			if !follow {
				return "", false
			}
			if rest := path.Join(comps...); rest != "" {
				return v.inRoot(next, rest)
			}
			return next, true
		case fi.Mode()&os.ModeSymlink != 0:
			if hops++; !follow || hops > 40 {
				return "", false
			}
			t, err := layer.Readlink(next)
			if err != nil || t == "" {
				return "", false
			}
			if path.IsAbs(t) {
				r, ok := v.inRoot(".", t)
				if !ok {
					return "", false
				}
				cur, t = ".", r
			}
			comps = append(strings.Split(t, "/"), comps...)
			continue
		case !fi.IsDir() && strings.Trim(strings.Join(comps, ""), ".") != "":
			return "", false // a file on the way
		}
		cur = next
	}
	return cur, true
}

// follow returns rel with the symlinks on its way resolved inside the root
// (resolve with follow).
func (v *view) follow(rel string) (string, bool) { return v.resolve(".", rel, true) }

// readTop returns up to max bytes of the regular file rel of the top, never
// following a symlink and never blocking; false when it is not a regular
// file or cannot be read.
func (v *view) readTop(rel string, max int64) ([]byte, bool) { return readFile(v.top, rel, max) }

// read is readTop through the layer that holds rel.
func (v *view) read(rel string, max int64) ([]byte, bool) {
	_, layer, err := v.lstat(rel)
	if err != nil {
		return nil, false
	}
	return readFile(layer, rel, max)
}

func readFile(root *os.Root, rel string, max int64) ([]byte, bool) {
	if fi, err := root.Lstat(rel); err != nil || !fi.Mode().IsRegular() {
		return nil, false // (a FIFO or a device is never opened)
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil || int64(len(b)) > max {
		return nil, false
	}
	return b, true
}

// couldHaveWritten reports whether the command could have written in the
// directory rel (fi), which this uid cannot read: it is this uid's own (the
// command ran as this uid, so it could write in it and then take the read
// permission away), or this uid can search it (git reaches what is in it
// by name). A directory that is someone else's and that this uid cannot
// search, the command could neither enter nor change — nor can the user's
// git.
func (v *view) couldHaveWritten(rel string, fi os.FileInfo) bool {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(sys.Uid) == os.Geteuid() || v.searchable(rel)
}

// searchable reports whether this uid can search the directory rel of the
// top (reach its entries by name), whether or not it can list it.
func (v *view) searchable(rel string) bool {
	pf, err := v.top.OpenFile(path.Dir(rel), os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return true // cannot tell: assume so
	}
	defer pf.Close()
	fd, err := unix.Openat(int(pf.Fd()), path.Base(rel), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	return searchable(fd) == nil
}
