//go:build linux

package audit

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path"
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
// keys only (modes.GitConfigSafe), a "*.sample" hook. A neutralized entry is
// renamed aside ("<name>.dsh-quarantined"), so no git reads or runs it, and
// recorded as a denial (op "git-control", syscall "post-run"). The walk goes
// through an os.Root of each audited root, never following a symlink out of
// it, and never descends through a symlink.

// gitControl is one control entry: its path relative to its audited root,
// and what it is.
type gitControl struct {
	rel  string
	kind gitKind
}

type gitKind int

const (
	gitConfig   gitKind = iota // config, config.worktree: must be GitConfigSafe
	gitHooksDir                // hooks: a real directory (its entries are checked)
	gitHook                    // an entry of hooks: must be an inert sample
	gitPointer                 // commondir, objects/info/alternates, a .git file or link: never changed
)

// gitInert reports whether a new or changed control entry is harmless.
func gitInert(root *os.Root, c gitControl, st stamp) bool {
	switch c.kind {
	case gitHooksDir:
		return st.mode&syscall.S_IFMT == syscall.S_IFDIR
	case gitHook:
		return st.mode&syscall.S_IFMT == syscall.S_IFREG && modes.GitHookInert(path.Base(c.rel))
	case gitConfig:
		if st.mode&syscall.S_IFMT != syscall.S_IFREG || st.size > modes.MaxGitConfig {
			return false
		}
		f, err := root.OpenFile(c.rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			return false
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, modes.MaxGitConfig+1))
		return err == nil && modes.GitConfigSafe(b)
	}
	return false
}

// walkGit calls visit for every control entry of every repository under
// root: a directory named .git, or one holding HEAD and either objects and
// refs or commondir (a bare repository, a submodule's or worktree's git
// directory), and every .git that is not a directory (a gitfile or a link).
// It never descends through a symlink, nor into a git directory's data,
// only into its modules and worktrees.
func walkGit(rootPath string, visit func(*os.Root, gitControl, stamp)) error {
	root, err := os.OpenRoot(rootPath)
	if err != nil {
		return err
	}
	defer root.Close()
	top, err := unix.Open(rootPath, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: rootPath, Err: err}
	}
	w := &gitWalk{root: root, visit: visit, buf: make([]byte, 64<<10)}
	w.dir(top, ".", 0)
	return nil
}

// gitWalk is one walk of an audited root. Directories are opened relative to
// their parent's descriptor (openat with O_NOFOLLOW: never through a
// symlink) and read with getdents64 into one buffer — a few system calls per
// directory and no allocation but the names — down to openDepth; deeper ones
// through the os.Root by path, so that a deep tree cannot exhaust
// descriptors.
type gitWalk struct {
	root  *os.Root
	visit func(*os.Root, gitControl, stamp)
	buf   []byte
}

const openDepth = 64

// dirent is one directory entry: its name, and whether it is a directory.
type dirent struct {
	name  string
	isDir bool
}

func (w *gitWalk) stamp(rel string) (stamp, bool) {
	fi, err := w.root.Lstat(rel)
	if err != nil {
		return stamp{}, false
	}
	return stampOf(fi)
}

func (w *gitWalk) entry(rel string, kind gitKind) {
	if st, ok := w.stamp(rel); ok {
		w.visit(w.root, gitControl{rel: rel, kind: kind}, st)
	}
}

// readDir lists the directory fd (without "." and ".."). Entries of an
// unknown type (DT_UNKNOWN) are typed with fstatat, never followed.
func (w *gitWalk) readDir(fd int) ([]dirent, error) {
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
			if string(name) == "." || string(name) == ".." {
				continue
			}
			d := dirent{name: string(name), isDir: typ == unix.DT_DIR}
			if typ == unix.DT_UNKNOWN {
				var st unix.Stat_t
				if unix.Fstatat(fd, d.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
					d.isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
				}
			}
			out = append(out, d)
		}
	}
}

// dir visits the directory fd (rel to the root, at depth) and closes it.
func (w *gitWalk) dir(fd int, rel string, depth int) {
	ents, err := w.readDir(fd)
	if err != nil {
		unix.Close(fd)
		return // unreadable for this uid: unreadable for its git too
	}
	var head, common, objects, refs, hooks, modules, worktrees bool
	for _, e := range ents {
		switch e.name {
		case "HEAD":
			head = true
		case "commondir":
			common = true
		case "objects":
			objects = e.isDir
		case "refs":
			refs = e.isDir
		case "hooks":
			hooks = e.isDir
		case "modules":
			modules = e.isDir
		case "worktrees":
			worktrees = e.isDir
		}
	}
	var subdirs []string
	if path.Base(rel) == ".git" || head && (common || objects && refs) {
		for _, n := range []string{"config", "config.worktree"} {
			w.entry(path.Join(rel, n), gitConfig)
		}
		w.entry(path.Join(rel, "commondir"), gitPointer)
		w.entry(path.Join(rel, "objects/info/alternates"), gitPointer)
		h := path.Join(rel, "hooks")
		w.entry(h, gitHooksDir)
		if hooks {
			if hfd, err := w.open(fd, "hooks", h, depth); err == nil {
				hs, _ := w.readDir(hfd)
				unix.Close(hfd)
				for _, e := range hs {
					w.entry(path.Join(h, e.name), gitHook)
				}
			}
		}
		if modules {
			subdirs = append(subdirs, "modules")
		}
		if worktrees {
			subdirs = append(subdirs, "worktrees")
		}
	} else {
		for _, e := range ents {
			switch {
			case e.name == ".git" && !e.isDir:
				w.entry(path.Join(rel, e.name), gitPointer)
			case e.isDir:
				subdirs = append(subdirs, e.name)
			}
		}
	}
	if depth >= openDepth {
		unix.Close(fd) // hold no descriptor while descending further
		fd = -1
	}
	for _, name := range subdirs {
		childRel := path.Join(rel, name)
		if cfd, err := w.open(fd, name, childRel, depth); err == nil {
			w.dir(cfd, childRel, depth+1)
		}
	}
	if fd >= 0 {
		unix.Close(fd)
	}
}

// open opens the subdirectory name of the directory parent (rel from the
// root), never through a symlink: relative to parent, or, beyond openDepth
// (parent -1), through the os.Root.
func (w *gitWalk) open(parent int, name, rel string, depth int) (int, error) {
	if parent < 0 || depth >= openDepth {
		f, err := w.root.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return -1, err
		}
		defer f.Close()
		return unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	}
	for {
		fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}
