//go:build linux

package sandbox

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"syscall"

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

// gitStamp identifies an entry's content: a change of any field is a change.
type gitStamp struct {
	dev, ino, size uint64
	mode           uint32
	mtime, ctime   syscall.Timespec
}

// gitAudit is the state of one audited root at the start.
type gitAudit struct {
	root   string
	before map[string]gitStamp
}

// auditedRoots are the roots whose repositories the audit covers: the
// workspace and every writable root except the shared scratch ones (/tmp,
// /dev/shm), which are not the user's repositories.
func auditedRoots(p modes.Policy) []string {
	if p.Mode != modes.WorkspaceWrite {
		return nil
	}
	roots := []string{p.Workspace}
	for _, r := range p.WritableRoots {
		if modes.Within(p.Workspace, r) {
			roots[0] = r // a root that holds the workspace covers it
			continue
		}
		if r == "/tmp" || r == "/dev/shm" || modes.Within(r, p.Workspace) {
			continue
		}
		roots = append(roots, r)
	}
	if roots[0] == "/tmp" || roots[0] == "/dev/shm" {
		roots[0] = p.Workspace
	}
	return roots
}

// startGitAudit records the control entries of every audited root. It must
// run before the command starts.
func startGitAudit(p modes.Policy) ([]*gitAudit, error) {
	var out []*gitAudit
	for _, r := range auditedRoots(p) {
		a := &gitAudit{root: r, before: map[string]gitStamp{}}
		err := walkGit(r, func(root *os.Root, c gitControl, st gitStamp) {
			a.before[c.rel] = st
		})
		if err != nil {
			return nil, fmt.Errorf("git audit: %s: %w", r, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// finishGitAudit neutralizes what changed. Every process of the command must
// be gone.
func finishGitAudit(audits []*gitAudit, facts *factLog) {
	for _, a := range audits {
		var bad []gitControl
		err := walkGit(a.root, func(root *os.Root, c gitControl, st gitStamp) {
			if old, ok := a.before[c.rel]; ok && old == st {
				return
			}
			if !gitInert(root, c, st) {
				bad = append(bad, c)
			}
		})
		if err != nil {
			// The root itself is gone or unreadable: nothing there for
			// git to run, but say so.
			facts.add(Denial{Op: "git-control", Path: a.root, Syscall: "post-run", Errno: "EIO"})
			continue
		}
		root, err := os.OpenRoot(a.root)
		if err != nil {
			continue
		}
		for _, c := range bad {
			facts.add(Denial{Op: "git-control", Path: filepath.Join(a.root, c.rel), Syscall: "post-run", Errno: quarantine(root, c.rel)})
		}
		root.Close()
	}
}

// quarantine renames rel aside, or removes it when it cannot be renamed,
// and returns the errno recorded with the fact.
func quarantine(root *os.Root, rel string) string {
	for i := 0; i < 100; i++ {
		dst := rel + ".dsh-quarantined"
		if i > 0 {
			dst += "." + strconv.Itoa(i)
		}
		if _, err := root.Lstat(dst); err == nil {
			continue
		}
		if root.Rename(rel, dst) == nil {
			return "EPERM"
		}
		break
	}
	if err := root.RemoveAll(rel); err != nil {
		return "EIO" // left in place: the denial says so
	}
	return "EPERM"
}

// gitInert reports whether a new or changed control entry is harmless.
func gitInert(root *os.Root, c gitControl, st gitStamp) bool {
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
func walkGit(rootPath string, visit func(*os.Root, gitControl, gitStamp)) error {
	root, err := os.OpenRoot(rootPath)
	if err != nil {
		return err
	}
	defer root.Close()
	stamp := func(rel string) (gitStamp, bool) {
		fi, err := root.Lstat(rel)
		if err != nil {
			return gitStamp{}, false
		}
		s, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return gitStamp{}, false
		}
		return gitStamp{dev: s.Dev, ino: s.Ino, size: uint64(s.Size), mode: s.Mode, mtime: s.Mtim, ctime: s.Ctim}, true
	}
	entry := func(rel string, kind gitKind) {
		if st, ok := stamp(rel); ok {
			visit(root, gitControl{rel: rel, kind: kind}, st)
		}
	}
	stack := []string{"."}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		ents, err := readDirIn(root, dir)
		if err != nil {
			if dir == "." {
				return err
			}
			continue // unreadable for this uid: unreadable for its git too
		}
		types := map[string]fs.FileMode{}
		for _, e := range ents {
			types[e.Name()] = e.Type()
		}
		_, head := types["HEAD"]
		_, common := types["commondir"]
		isDir := func(n string) bool { t, ok := types[n]; return ok && t.IsDir() }
		if path.Base(dir) == ".git" || head && (common || isDir("objects") && isDir("refs")) {
			for _, n := range []string{"config", "config.worktree"} {
				entry(path.Join(dir, n), gitConfig)
			}
			entry(path.Join(dir, "commondir"), gitPointer)
			entry(path.Join(dir, "objects/info/alternates"), gitPointer)
			hooks := path.Join(dir, "hooks")
			entry(hooks, gitHooksDir)
			if isDir("hooks") {
				if hs, err := readDirIn(root, hooks); err == nil {
					for _, h := range hs {
						entry(path.Join(hooks, h.Name()), gitHook)
					}
				}
			}
			for _, n := range []string{"modules", "worktrees"} {
				if isDir(n) {
					stack = append(stack, path.Join(dir, n))
				}
			}
			continue
		}
		for _, e := range ents {
			rel := path.Join(dir, e.Name())
			switch {
			case e.Name() == ".git" && !e.IsDir():
				entry(rel, gitPointer)
			case e.IsDir():
				stack = append(stack, rel)
			}
		}
	}
	return nil
}

func readDirIn(root *os.Root, dir string) ([]fs.DirEntry, error) {
	f, err := root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}
