//go:build linux

package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// stamp identifies an entry's content: a change of any field is a change.
type stamp struct {
	dev, ino, size uint64
	mode           uint32
	mtime, ctime   syscall.Timespec
}

func (s stamp) isDir() bool { return s.mode&syscall.S_IFMT == syscall.S_IFDIR }

func stampOf(fi os.FileInfo) (stamp, bool) {
	s, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{}, false
	}
	return stamp{dev: s.Dev, ino: s.Ino, size: uint64(s.Size), mode: s.Mode, mtime: s.Mtim, ctime: s.Ctim}, true
}

// Audit is the state of one audited root at the start.
type Audit struct {
	root string
	// at is where root is read ("": root itself): a transaction's upper
	// layer, see StartOver.
	at string
	// git are the control entries of its repositories, by path relative
	// to root.
	git map[string]stamp
	// protected are the protected paths in root the audit covers, each
	// with the entries at and under it.
	protected []*protectedPath
	// held are the protected paths in root that existed at the start as
	// files or directories (not symlinks): with a mount view (or a
	// carved Landlock ruleset) the kernel kept them read-only, so nothing
	// of the command changed them, and a change found there is the host's
	// own (the user's git or editor, during the run) — not quarantined.
	held []string
}

// Start records the git control entries and the protected entries of every
// audited root of p. It must run before the command starts. Protected paths
// in skip (written by the sandbox itself during the run: an executor's
// spill directory) are left to the other layers.
func Start(p modes.Policy, skip []string) ([]*Audit, error) { return StartOver(p, skip, "", "") }

// StartOver is Start with the audited root `root` read at `over` instead: a
// transaction's upper layer, where every write of the command to root lands
// and nothing else writes. Its entries are reported under root; none is
// held by the kernel, and Finish neutralizes one by removing it from over,
// which reverts the path to what root holds.
func StartOver(p modes.Policy, skip []string, root, over string) ([]*Audit, error) {
	var out []*Audit
	for _, r := range p.AuditedRoots() {
		a := &Audit{root: r, git: map[string]stamp{}}
		if r == root {
			a.at = over
		}
		for _, pp := range p.Protected {
			if !modes.Within(pp, r) || pp == r {
				continue
			}
			if fi, err := os.Lstat(pp); a.at == "" && err == nil && fi.Mode()&os.ModeSymlink == 0 {
				a.held = append(a.held, pp)
			}
			if !inAny(pp, skip) {
				a.protected = append(a.protected, &protectedPath{rel: relTo(r, pp)})
			}
		}
		root, err := os.OpenRoot(a.dir())
		if err != nil {
			return nil, fmt.Errorf("audit: %s: %w", a.dir(), err)
		}
		for _, pp := range a.protected {
			pp.record(root)
		}
		root.Close()
		err = walkGit(a.dir(), func(root *os.Root, c gitControl, st stamp) {
			a.git[c.rel] = st
		})
		if err != nil {
			return nil, fmt.Errorf("audit: %s: %w", a.dir(), err)
		}
		out = append(out, a)
	}
	return out, nil
}

// dir is the directory the audit reads.
func (a *Audit) dir() string {
	if a.at != "" {
		return a.at
	}
	return a.root
}

// neutralize renames rel aside (or, in a transaction's upper layer, removes
// it) and returns the errno recorded with the fact.
func (a *Audit) neutralize(root *os.Root, rel string) string {
	if a.at == "" {
		return quarantine(root, rel)
	}
	if err := root.RemoveAll(rel); err != nil {
		return "EIO"
	}
	return "EPERM"
}

// Finish neutralizes what changed, recording each entry it neutralized in
// denials. Every process of the command must be gone. kernelHeld says the
// protected paths were read-only in the kernel for the whole run (a
// complete mount view, or a carved Landlock ruleset).
func Finish(audits []*Audit, denials *facts.Log, kernelHeld bool) {
	for _, a := range audits {
		root, err := os.OpenRoot(a.dir())
		if err != nil {
			// The root itself is gone or unreadable: nothing there for
			// anything to run, but say so.
			denials.Add(facts.Denial{Op: "git-control", Path: a.root, Syscall: "post-run", Errno: "EIO"})
			continue
		}
		held := func(rel string) bool { return kernelHeld && a.holds(filepath.Join(a.root, rel)) }
		// Git's control entries first, judged by git's rules (a new
		// config of allowlisted keys, a sample hook are inert); the
		// protected paths' walk leaves them to this one.
		var bad []string
		control := map[string]bool{}
		err = walkGit(a.dir(), func(root *os.Root, c gitControl, st stamp) {
			control[c.rel] = true
			if old, ok := a.git[c.rel]; ok && old == st || held(c.rel) {
				return
			}
			if !gitInert(root, c, st) {
				bad = append(bad, c.rel)
			}
		})
		if err != nil {
			denials.Add(facts.Denial{Op: "git-control", Path: a.root, Syscall: "post-run", Errno: "EIO"})
		}
		for _, rel := range bad {
			denials.Add(facts.Denial{Op: "git-control", Path: filepath.Join(a.root, rel), Syscall: "post-run", Errno: a.neutralize(root, rel)})
		}
		for _, pp := range a.protected {
			for _, rel := range pp.changed(root, func(rel string) bool { return control[rel] || held(rel) }) {
				denials.Add(facts.Denial{Op: "protected-path", Path: filepath.Join(a.root, rel), Syscall: "post-run", Errno: a.neutralize(root, rel)})
			}
		}
		root.Close()
	}
}

// holds reports whether path lies in a protected path that existed at the
// start.
func (a *Audit) holds(path string) bool { return inAny(path, a.held) }

func inAny(path string, roots []string) bool {
	for _, r := range roots {
		if modes.Within(path, r) {
			return true
		}
	}
	return false
}

// relTo returns path relative to root; path lies strictly beneath it.
func relTo(root, path string) string {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return path // unreachable for a path beneath root
	}
	return rel
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
