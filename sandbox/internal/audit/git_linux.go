//go:build linux

package audit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// The git audit closes git persistence for every repository in the audited
// roots (the workspace and the extra writable roots), whatever created it and
// however: before the command starts, it records every git control entry —
// what git executes or follows — of every repository there; once every
// process of the command is gone, it finds them again and neutralizes each
// one that is new or changed, unless it is inert: a config of allowlisted
// keys only (modes.GitConfigSafeWith; a submodule's core.worktree), a
// "*.sample" hook, a pointer (a .git file or link, a commondir) naming a
// git directory of the same root, by a way without symlinks, whose config
// binds nothing to a work tree (a worktree, a submodule: the git directory
// it names is audited like any other). A neutralized entry is renamed aside
// ("<name>.dsh-quarantined"), so no git reads or runs it, and recorded as a
// denial (op "git-control", syscall "post-run"). What a repository's own
// config makes git run outside its git directory is derive_linux.go's.
//
// A repository is found as git finds one (setup.c): a directory named .git;
// a directory that git's is_git_directory accepts — HEAD, and commondir or
// objects and refs, each of any type (git tests them with access(), through
// a symlink; HEAD's content is not checked: a directory git would refuse is
// inspected all the same); whatever a .git file or link or a commondir
// names; and, at the end, whatever was one at the start. Being a git
// directory never ends the walk: every directory of the root is read, git's
// data included, because a later git finds a repository under any directory
// it is started in (a symlink the command left leads there), and a decoy git
// directory must not hide one. A directory the walk cannot read is never
// skipped when the command could have written in it: it is set aside whole.
// The walk goes through descriptors of the root (openat with O_NOFOLLOW,
// and an os.Root beyond a depth), never following a symlink.

// gitKind is what a control entry is, which says when it is inert.
type gitKind int

const (
	gitConfig     gitKind = iota // config, config.worktree: must be GitConfigSafeWith
	gitHooksDir                  // hooks: a real directory (its entries are checked)
	gitHook                      // an entry of hooks: must be an inert sample
	gitPointer                   // a .git file or link, commondir: must name a git directory of the root that binds nothing to a work tree
	gitAlternates                // objects/info/alternates: never changed
	gitUnreadable                // a directory the walk could not read, that the command could have written in: never inert
)

// gitEntry is one control entry: its path relative to its audited root,
// what it is, and its stamp.
type gitEntry struct {
	rel  string
	kind gitKind
	st   stamp
}

// gitScan is what one walk of an audited root found.
type gitScan struct {
	entries []gitEntry // parents first
	// dirs are the git directories: what git would take for one, and
	// what a pointer or the caller names.
	dirs map[string]bool
	// pointers maps a .git file or link and a commondir to the directory
	// it names, "" when it names none git could use inside the root
	// without passing a symlink.
	pointers map[string]string
	// err is the first failure that was not a denial of access (no
	// descriptor left, an I/O error): the scan is incomplete.
	err error
}

// scanGit walks the whole view v, taking the directories of forced for git
// directories whatever they hold (those found at the start). The error is
// the root's own: nothing was read.
func scanGit(v *view, forced map[string]bool) (*gitScan, error) {
	top, err := unix.Open(v.topPath, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: v.topPath, Err: err}
	}
	w := &gitWalk{
		v: v, forced: forced, buf: make([]byte, 64<<10),
		sc:     &gitScan{dirs: map[string]bool{}, pointers: map[string]string{}},
		listed: map[gitEntryKey]bool{},
	}
	if err := searchable(top); err != nil {
		unix.Close(top)
		return nil, &os.PathError{Op: "open", Path: v.topPath, Err: err}
	}
	w.dir(top, ".", 0, v.lower != nil)
	// What a pointer names is a git directory, whatever it holds; and
	// what its own commondir names in turn.
	for i := 0; i < len(w.pending); i++ {
		if t := w.pending[i]; !w.sc.dirs[t] {
			w.inspect(t)
		}
	}
	return w.sc, nil
}

// gitWalk is one walk of an audited root. Directories are opened relative to
// their parent's descriptor (openat with O_NOFOLLOW: never through a
// symlink) and read with getdents64 into one buffer — a few system calls per
// directory and no allocation but the names — down to openDepth; deeper ones
// through the os.Root by path, so that a deep tree cannot exhaust
// descriptors.
type gitWalk struct {
	v       *view
	forced  map[string]bool
	buf     []byte
	sc      *gitScan
	listed  map[gitEntryKey]bool
	pending []string // directories pointers name
}

type gitEntryKey struct {
	rel  string
	kind gitKind
}

const openDepth = 64

// dirent is one directory entry.
type dirent struct {
	name     string
	isDir    bool
	whiteout bool // an overlay whiteout in a transaction's upper layer: a removal
}

// add lists a control entry, once.
func (w *gitWalk) add(e gitEntry) {
	if k := (gitEntryKey{e.rel, e.kind}); !w.listed[k] {
		w.listed[k] = true
		w.sc.entries = append(w.sc.entries, e)
	}
}

// entry lists rel as a control entry of kind if the command's side (the
// view's top) holds it, and returns its stamp.
func (w *gitWalk) entry(rel string, kind gitKind) (stamp, bool) {
	fi, err := w.v.top.Lstat(rel)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) {
			w.unreadable(path.Dir(rel), err)
		}
		return stamp{}, false
	}
	st, ok := stampOf(fi)
	if !ok || w.v.lower != nil && st.whiteout() {
		return stamp{}, false // a removal: nothing left to run
	}
	w.add(gitEntry{rel: rel, kind: kind, st: st})
	return st, true
}

// realDir reports whether the top holds a directory at rel (not a symlink
// to one).
func (w *gitWalk) realDir(rel string) bool {
	fi, err := w.v.top.Lstat(rel)
	return err == nil && fi.IsDir()
}

// readDir lists the directory fd (without "." and ".."): all of it, or
// (all false) only what the walk looks at — directories, and the names git
// tells a repository by — so that the names of plain files cost nothing.
// Entries of an unknown type (DT_UNKNOWN) are typed with fstatat, never
// followed.
func (w *gitWalk) readDir(fd int, all bool) ([]dirent, error) {
	var out []dirent
	for {
		n, err := unix.Getdents(fd, w.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		for b := w.buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				break
			}
			typ, name := b[18], b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			switch string(name) {
			case ".", "..":
				continue
			case ".git", "HEAD", "commondir", "objects", "refs":
			default:
				if !all && typ != unix.DT_DIR && typ != unix.DT_UNKNOWN {
					continue
				}
			}
			d := dirent{name: string(name), isDir: typ == unix.DT_DIR}
			if typ == unix.DT_UNKNOWN || typ == unix.DT_CHR && w.v.lower != nil {
				var st unix.Stat_t
				if err := unix.Fstatat(fd, d.name, &st, unix.AT_SYMLINK_NOFOLLOW); err == unix.EACCES {
					return nil, err // not searchable: its entries cannot be typed
				} else if err == nil {
					d.isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
					d.whiteout = w.v.lower != nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
				}
			}
			out = append(out, d)
		}
	}
}

// searchable fails when the directory fd cannot be searched (a mode
// without x): its entries can be listed but not reached.
func searchable(fd int) error {
	var st unix.Stat_t
	return unix.Fstatat(fd, ".", &st, unix.AT_SYMLINK_NOFOLLOW)
}

// dir visits the directory fd (rel to the root, at depth) and closes it.
// lowerVis says that, in a transaction, the workspace's directory rel shows
// through the upper layer's.
//
// A directory that cannot be searched (a mode with r but not x) lists, but
// nothing in it can be reached: it is found so where something in it is
// looked up — a subdirectory, a control entry, an entry of an unknown type
// — which is everywhere git could find something (a directory with nothing
// of that is nothing to git).
func (w *gitWalk) dir(fd int, rel string, depth int, lowerVis bool) {
	ents, err := w.readDir(fd, false)
	if err != nil {
		unix.Close(fd)
		w.unreadable(rel, err)
		return
	}
	if lowerVis && rel != "." {
		lowerVis = !opaque(fd) && w.v.lowerIsDir(rel)
	}
	// The names git tells a git directory by: in the top, or removed
	// from it (a whiteout hides the lower layer's).
	const nHEAD, nCommondir, nObjects, nRefs = 1, 2, 4, 8
	var top, whited uint8
	var subdirs []string
	for _, e := range ents {
		var bit uint8
		switch e.name {
		case "HEAD":
			bit = nHEAD
		case "commondir":
			bit = nCommondir
		case "objects":
			bit = nObjects
		case "refs":
			bit = nRefs
		}
		if e.whiteout {
			whited |= bit
		} else {
			top |= bit
		}
		switch {
		case e.whiteout:
		case e.isDir:
			subdirs = append(subdirs, e.name)
		case e.name == ".git":
			rel := path.Join(rel, e.name)
			if st, ok := w.entry(rel, gitPointer); ok {
				w.pointer(rel, st)
			}
		}
	}
	has := func(bit uint8, name string) bool {
		if top&bit != 0 {
			return true
		}
		if whited&bit != 0 || !lowerVis {
			return false
		}
		_, err := w.v.lower.Lstat(path.Join(rel, name))
		return err == nil
	}
	if path.Base(rel) == ".git" || w.forced[rel] ||
		has(nHEAD, "HEAD") && (has(nCommondir, "commondir") || has(nObjects, "objects") && has(nRefs, "refs")) {
		w.gitDir(fd, rel, depth)
	}
	if depth >= openDepth {
		unix.Close(fd) // hold no descriptor while descending further
		fd = -1
	}
	for _, name := range subdirs {
		childRel := path.Join(rel, name)
		cfd, err := w.open(fd, name, childRel, depth)
		if err != nil {
			if errors.Is(err, fs.ErrPermission) && fd >= 0 && searchable(fd) != nil {
				unix.Close(fd)
				w.unreadable(rel, err) // this one, not the child
				return
			}
			w.unreadable(childRel, err)
			continue
		}
		w.dir(cfd, childRel, depth+1, lowerVis)
	}
	if fd >= 0 {
		unix.Close(fd)
	}
}

// gitDir lists the control entries of the git directory rel (its
// descriptor fd, at depth).
func (w *gitWalk) gitDir(fd int, rel string, depth int) {
	if w.sc.dirs[rel] {
		return
	}
	w.sc.dirs[rel] = true
	for _, n := range []string{"config", "config.worktree"} {
		w.entry(path.Join(rel, n), gitConfig)
	}
	if st, ok := w.entry(path.Join(rel, "commondir"), gitPointer); ok {
		w.pointer(path.Join(rel, "commondir"), st)
	}
	if w.realDir(path.Join(rel, "objects")) && w.realDir(path.Join(rel, "objects/info")) {
		// (Through an objects that is a symlink, git reads what is
		// elsewhere: no entry of this root.)
		w.entry(path.Join(rel, "objects/info/alternates"), gitAlternates)
	}
	h := path.Join(rel, "hooks")
	st, ok := w.entry(h, gitHooksDir)
	if !ok || !st.isDir() {
		return
	}
	hfd, err := w.open(fd, "hooks", h, depth)
	if err != nil {
		w.unreadable(h, err)
		return
	}
	defer unix.Close(hfd)
	hs, err := w.readDir(hfd, true)
	if err == nil && len(hs) > 0 {
		err = searchable(hfd) // (its hooks are looked up by path)
	}
	if err != nil {
		w.unreadable(h, err)
		return
	}
	for _, e := range hs {
		if !e.whiteout {
			w.entry(path.Join(h, e.name), gitHook)
		}
	}
}

// inspect lists the control entries of rel, a directory a pointer names,
// which the walk did not take for a git directory.
func (w *gitWalk) inspect(rel string) {
	f, err := w.v.top.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return // not in the top (the workspace's own, in a transaction), or read as unreadable by the walk
	}
	defer f.Close()
	w.gitDir(int(f.Fd()), rel, openDepth)
}

// pointer records what the pointer rel names.
func (w *gitWalk) pointer(rel string, st stamp) {
	t := w.v.resolvePointer(rel, st)
	w.sc.pointers[rel] = t
	if t != "" && !w.sc.dirs[t] {
		w.pending = append(w.pending, t)
	}
}

// unreadable lists the directory rel, which the walk could not open or read
// (err), when the command could have written in it (view.couldHaveWritten).
// Any other failure makes the scan incomplete.
func (w *gitWalk) unreadable(rel string, err error) {
	if !errors.Is(err, fs.ErrPermission) || rel == "." {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) && w.sc.err == nil {
			w.sc.err = fmt.Errorf("%s: %w", rel, err)
		}
		return
	}
	fi, lerr := w.v.top.Lstat(rel)
	if lerr != nil {
		if w.sc.err == nil {
			w.sc.err = fmt.Errorf("%s: %w", rel, err)
		}
		return
	}
	st, ok := stampOf(fi)
	if !ok {
		return
	}
	if !w.v.couldHaveWritten(rel, fi) {
		return
	}
	w.add(gitEntry{rel: rel, kind: gitUnreadable, st: st})
}

// open opens the subdirectory name of the directory parent (rel from the
// root), never through a symlink: relative to parent, or, beyond openDepth
// (parent -1), through the os.Root.
func (w *gitWalk) open(parent int, name, rel string, depth int) (int, error) {
	if parent < 0 || depth >= openDepth {
		f, err := w.v.top.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return -1, err
		}
		defer f.Close()
		return unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	}
	for {
		fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			if err != nil {
				return -1, &os.PathError{Op: "openat", Path: rel, Err: err}
			}
			return fd, nil
		}
	}
}

// gitInert reports whether a new or changed control entry is harmless.
func gitInert(v *view, sc *gitScan, e gitEntry) bool {
	switch e.kind {
	case gitHooksDir:
		return e.st.isDir()
	case gitHook:
		return e.st.mode&syscall.S_IFMT == syscall.S_IFREG && modes.GitHookInert(path.Base(e.rel))
	case gitConfig:
		if e.st.mode&syscall.S_IFMT != syscall.S_IFREG || e.st.size > modes.MaxGitConfig {
			return false
		}
		b, ok := v.readTop(e.rel, modes.MaxGitConfig)
		gitDir := path.Dir(e.rel)
		// A core.worktree is a submodule's: the directory it names
		// holds the .git file naming this git directory, so it is the
		// work tree git would take anyway.
		return ok && modes.GitConfigSafeWith(b, func(worktree string) bool {
			r, ok := v.resolve(gitDir, worktree, false)
			return ok && sc.pointers[path.Join(r, ".git")] == gitDir
		})
	case gitPointer:
		t := sc.pointers[e.rel]
		return t != "" && !v.bindsWorkTree(t, sc)
	}
	return false
}

// maxPointer bounds what is read of a .git file or commondir.
const maxPointer = 4096

// resolvePointer returns the directory of the root that the pointer rel
// (with stamp st, in the top) names — a .git file's "gitdir: ", a .git
// link's target, a commondir's content — or "" when it names none that git
// could use inside the root without passing a symlink.
func (v *view) resolvePointer(rel string, st stamp) string {
	var target string
	switch {
	case st.mode&syscall.S_IFMT == syscall.S_IFLNK && path.Base(rel) == ".git":
		t, err := v.top.Readlink(rel)
		if err != nil {
			return ""
		}
		target = t
	case st.mode&syscall.S_IFMT == syscall.S_IFREG:
		b, ok := v.readTop(rel, maxPointer)
		if !ok {
			return ""
		}
		if path.Base(rel) == ".git" {
			// read_gitfile_gently: "gitdir: PATH", line ends dropped.
			t, ok := strings.CutPrefix(strings.TrimRight(string(b), "\r\n"), "gitdir: ")
			if !ok {
				return ""
			}
			target = t
		} else {
			target = strings.TrimRight(string(b), " \t\r\n")
		}
	default:
		return ""
	}
	r, ok := v.resolve(path.Dir(rel), target, false)
	if !ok || !v.isDir(r) {
		return ""
	}
	return r
}

// bindsWorkTree reports whether the config of the git directory g (its own
// and its common directory's) makes git run or read something by a path
// relative to a work tree — a relative core.hooksPath, a program named by a
// relative path, any include — so that a new work tree for g (a .git file,
// a commondir naming it) would put that somewhere nothing protects.
func (v *view) bindsWorkTree(g string, sc *gitScan) bool {
	dirs := []string{g}
	if c := sc.pointers[path.Join(g, "commondir")]; c != "" {
		dirs = append(dirs, c)
	}
	for _, d := range dirs {
		for _, n := range []string{"config", "config.worktree"} {
			rel := path.Join(d, n)
			if _, _, err := v.lstat(rel); errors.Is(err, fs.ErrNotExist) {
				continue
			}
			b, ok := v.read(rel, maxConfig)
			if !ok {
				return true // unreadable: assume the worst
			}
			for _, e := range parseGitConfig(b) {
				switch {
				case e.name() == "core.hookspath" && !absPathname(e.value),
					e.section == "include" || e.section == "includeif":
					return true
				case commandKey(e):
					for _, p := range programs(e.value) {
						if !absPathname(p) {
							return true
						}
					}
				}
			}
		}
	}
	return false
}

// absPathname reports whether a config pathname names the same file from
// every directory: absolute or "~/".
func absPathname(p string) bool { return path.IsAbs(p) || strings.HasPrefix(p, "~/") }
