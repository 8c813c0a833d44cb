package changes

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// state is what a path was at one moment.
type state struct {
	exists   bool
	dev, ino uint64
	mode     uint32 // st_mode: type and permission bits
	size     int64
	mtime    unix.Timespec
}

func stateOf(st *unix.Stat_t) state {
	return state{exists: true, dev: st.Dev, ino: st.Ino, mode: st.Mode, size: st.Size, mtime: st.Mtim}
}

func (s state) sameFile(o state) bool {
	return s.exists && o.exists && s.dev == o.dev && s.ino == o.ino
}

func (s state) typeName() string { return TypeOf(s.mode) }

// TypeOf names the file type of a stat mode as a Change's Type does:
// "file", "dir", "symlink" or "other".
func TypeOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "other"
}

// Tracker records the paths one command's allowed write-like calls named.
// Touch may be called from several goroutines; Settle once, at the end.
type Tracker struct {
	roots []string // the writable roots (and the workspace): only paths beneath them count

	mu      sync.Mutex
	root    int // the command's root directory (a duplicate), -1 until the first Touch
	order   []string
	before  map[string]state
	renames []rename       // in the order the calls were made
	tracked map[string]int // paths recorded, by writable root
	dropped map[string]int // paths named but not recorded, by writable root
	off     bool           // the kernel has no openat2: nothing is recorded
}

// NewTracker returns the tracker of a command run under p: it records
// paths beneath p's writable roots (not device sinks or terminals).
func NewTracker(p modes.Policy) *Tracker {
	roots := slices.Clone(p.WritableRoots)
	// The workspace is a root of its own even inside a wider one (/tmp):
	// its changes are counted apart from the rest of that root's.
	for _, r := range p.WritableRoots {
		if p.Workspace != "" && p.Workspace != r && modes.Within(p.Workspace, r) {
			roots = append(roots, p.Workspace)
			break
		}
	}
	return &Tracker{roots: roots, root: -1, before: map[string]state{},
		tracked: map[string]int{}, dropped: map[string]int{}}
}

// rootOf is the writable root canonical path p lies in, or "".
func (t *Tracker) rootOf(p string) string {
	best := ""
	for _, r := range t.roots {
		if modes.Within(p, r) && len(r) > len(best) {
			best = r
		}
	}
	return best
}

// Touch records canonical path p, named by a write-like call the policy
// allows and the kernel has not run yet, looked up under rootfd (the
// command's root directory): the first time only. Call it before letting
// the call continue.
func (t *Tracker) Touch(rootfd int, p string) {
	if t == nil {
		return
	}
	r := t.rootOf(p)
	if r == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.off {
		return
	}
	if _, ok := t.before[p]; ok {
		return
	}
	if t.tracked[r] >= MaxTracked {
		t.dropped[r]++
		return
	}
	if t.root < 0 {
		fd, err := unix.FcntlInt(uintptr(rootfd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			t.dropped[r]++
			return
		}
		t.root = fd
	}
	t.tracked[r]++
	s, err := lookupPath(t.root, p)
	if errors.Is(err, unix.ENOSYS) {
		t.off = true
		return
	}
	t.order = append(t.order, p)
	t.before[p] = s
}

// rename is one rename call let through.
type rename struct{ from, to string }

// Rename records a rename of canonical path from to canonical path to, let
// through and not run yet (both are touched). A rename that exchanges the
// two (RENAME_EXCHANGE) is two touches, not a Rename.
func (t *Tracker) Rename(rootfd int, from, to string) {
	if t == nil {
		return
	}
	t.Touch(rootfd, from)
	t.Touch(rootfd, to)
	if t.rootOf(from) == "" || t.rootOf(to) == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.renames) < MaxTracked {
		t.renames = append(t.renames, rename{from, to})
	}
}

// movedTo follows the renames made after the path from was named: where
// what was at from went (from itself when no rename took it away).
func (t *Tracker) movedTo(from string) string {
	cur := from
	for _, r := range t.renames {
		if r.from == cur {
			cur = r.to
		}
	}
	return cur
}

// lookupPath is lookup for one path, in one system call for a path that
// does not exist (what most write-like calls name): an openat2 of the path
// itself, which follows no symlink; only a final symlink (ELOOP) needs its
// parent opened and an fstatat of its name.
func lookupPath(root int, p string) (state, error) {
	fd, err := unix.Openat2(root, "."+p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch err {
	case nil:
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return state{}, nil
		}
		return stateOf(&st), nil
	case unix.ELOOP:
		return lookup(root, p, nil)
	case unix.ENOSYS:
		return state{}, err
	}
	return state{}, nil // ENOENT, ENOTDIR: it does not exist as named
}

// dirCache holds the directories Settle opened, by path.
type dirCache map[string]int

// lookup returns the state of canonical path p under root: its parent
// opened with openat2 in root, never through a symlink, then an fstatat of
// its name that does not follow one. A path whose parent cannot be reached
// so (gone, or now through a symlink) does not exist as named. dirs, when
// not nil, keeps the parents open for the next lookup.
func lookup(root int, p string, dirs dirCache) (state, error) {
	dir, name := path.Split(p)
	if name == "" {
		return state{}, nil // "/" is never in a writable root
	}
	fd, ok := dirs[dir]
	if !ok {
		var err error
		fd, err = unix.Openat2(root, "."+dir, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err == unix.ENOSYS {
			return state{}, err
		}
		if err != nil {
			fd = -1
		}
		if dirs != nil {
			dirs[dir] = fd
		} else if fd >= 0 {
			defer unix.Close(fd)
		}
	}
	if fd < 0 {
		return state{}, nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH); err != nil {
		return state{}, nil
	}
	return stateOf(&st), nil
}

// Settle compares every recorded path with what it is now, once the
// command's processes are gone, and returns the changes in the order the
// paths were first named (at most MaxChanges per writable root) and how
// many were left out in each root that left some out. It releases the
// tracker's root: call it once.
func (t *Tracker) Settle() (out []Change, dropped map[string]int) {
	if t == nil {
		return nil, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	drop := func(r string, n int) {
		if dropped == nil {
			dropped = map[string]int{}
		}
		dropped[r] += n
	}
	for r, n := range t.dropped {
		drop(r, n)
	}
	if t.root < 0 {
		return nil, dropped
	}
	dirs := dirCache{}
	after := make(map[string]state, len(t.order))
	for _, p := range t.order {
		after[p], _ = lookup(t.root, p, dirs)
	}
	for _, fd := range dirs {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	unix.Close(t.root)
	t.root = -1

	// A file that was at one recorded path before and, following the
	// renames the command made, is at another now was renamed there. The
	// inode alone would not do: a removed file's is reused at once.
	renamedFrom := map[string]string{}
	for _, p := range t.order {
		b := t.before[p]
		if !b.exists || b.sameFile(after[p]) {
			continue
		}
		if to := t.movedTo(p); to != p && b.sameFile(after[to]) {
			renamedFrom[to] = p
		}
	}
	moved := map[string]bool{}
	var changes []Change
	for _, p := range t.order {
		b, a := t.before[p], after[p]
		var c Change
		switch {
		case a.exists && !b.sameFile(a):
			c = Change{Op: OpCreated, Path: p}
			if b.exists {
				c.Op = OpModified // replaced: an editor's save, a rename over it
			}
			if from, ok := renamedFrom[p]; ok {
				c.Op, c.From = OpRenamed, from
				moved[from] = true
			}
		case a.exists && (a.size != b.size || a.mtime != b.mtime || a.mode&unix.S_IFMT != b.mode&unix.S_IFMT):
			c = Change{Op: OpModified, Path: p}
		case a.exists && a.mode != b.mode:
			c = Change{Op: OpMode, Path: p}
		case !a.exists && b.exists:
			c = Change{Op: OpRemoved, Path: p}
		default:
			continue // unchanged, or created and removed again
		}
		if a.exists {
			c.Type, c.Mode = a.typeName(), fmt.Sprintf("%04o", a.mode&0o7777)
			if c.Type == "file" {
				c.Size = a.size
			}
		}
		changes = append(changes, c)
	}
	listed := map[string]int{}
	for _, c := range changes {
		if c.Op == OpRemoved && moved[c.Path] {
			continue
		}
		c.Root = t.rootOf(c.Path)
		if listed[c.Root] == MaxChanges {
			drop(c.Root, 1)
			continue
		}
		listed[c.Root]++
		out = append(out, c)
	}
	return out, dropped
}

// Close releases the tracker's root without settling (a command that never
// started).
func (t *Tracker) Close() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.root >= 0 {
		unix.Close(t.root)
		t.root = -1
	}
}
