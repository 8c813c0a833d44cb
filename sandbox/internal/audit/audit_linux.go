//go:build linux

package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// stamp identifies an entry's content: a change of any field is a change.
type stamp struct {
	dev, ino, size, rdev uint64
	mode                 uint32
	mtime, ctime         syscall.Timespec
}

func (s stamp) isDir() bool { return s.mode&syscall.S_IFMT == syscall.S_IFDIR }

// whiteout reports whether the entry is an overlay whiteout (a removal, in
// a transaction's upper layer).
func (s stamp) whiteout() bool { return s.mode&syscall.S_IFMT == syscall.S_IFCHR && s.rdev == 0 }

func stampOf(fi os.FileInfo) (stamp, bool) {
	s, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{}, false
	}
	return stamp{dev: s.Dev, ino: s.Ino, size: uint64(s.Size), rdev: s.Rdev, mode: s.Mode, mtime: s.Mtim, ctime: s.Ctim}, true
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
	// gitDirs are the git directories found at the start (in a
	// transaction, the workspace's too): their control entries are
	// judged at the end, whatever they look like then.
	gitDirs map[string]bool
	// started is the walk at the start, for the walk at the end to take
	// what did not change from (dirRecord, gitScan.whole).
	started *gitScan
	// cache is where the walks' records are kept between commands (nil:
	// nowhere).
	cache *Cache
	// mode is the mode of the directory read, at the start.
	mode uint32
	// protected are the protected paths in root the audit covers, each
	// with the entries at and under it: the policy's, and what the
	// repositories' own configs make git run (deriveExec).
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
// spill directory) are left to the other layers. A cache (nil: none) keeps
// what the walks read from one command to the next (see Cache).
func Start(p modes.Policy, skip []string, cache *Cache) ([]*Audit, error) {
	return startOver(p, skip, "", "", cache, nil)
}

// CheckRoots returns the error Start would return for an audited root of p
// it cannot open and search (missing, or not this user's to read), so that
// a caller running StartStoppable beside the command can refuse the
// command first, as Start's caller does.
func CheckRoots(p modes.Policy) error {
	for _, r := range p.AuditedRoots() {
		fd, err := unix.Open(r, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			err = searchable(fd)
			unix.Close(fd)
		}
		if err != nil {
			return fmt.Errorf("audit: %s: %w", r, &os.PathError{Op: "open", Path: r, Err: err})
		}
	}
	return nil
}

// ErrStopped is StartStoppable's error once its stop was closed.
var ErrStopped = errors.New("audit: the start walk was abandoned")

// StartStoppable is Start for a walk beside the command's start: one
// walker, leaving the other CPUs to the command, abandoned as soon as stop
// is closed (it then returns ErrStopped, having kept nothing of its walks in
// cache). A command that makes no notified call changes nothing in the
// audited roots, so its start walk need not finish (see package sandbox,
// startWalk).
func StartStoppable(p modes.Policy, skip []string, cache *Cache, stop <-chan struct{}) ([]*Audit, error) {
	return startOver(p, skip, "", "", cache, stop)
}

// StartOver is Start with the audited root `root` read at `over` instead: a
// transaction's upper layer, where every write of the command to root lands
// and nothing else writes. Its entries are reported under root; none is
// held by the kernel, and Finish neutralizes one by removing it from over,
// which reverts the path to what root holds.
func StartOver(p modes.Policy, skip []string, root, over string, cache *Cache) ([]*Audit, error) {
	return startOver(p, skip, root, over, cache, nil)
}

func startOver(p modes.Policy, skip []string, root, over string, cache *Cache, stop <-chan struct{}) ([]*Audit, error) {
	var out []*Audit
	for _, r := range p.AuditedRoots() {
		a := &Audit{root: r, git: map[string]stamp{}, cache: cache}
		if r == root {
			a.at = over
		}
		if err := a.start(p, skip, stop); err != nil {
			if errors.Is(err, ErrStopped) {
				return nil, err
			}
			return nil, fmt.Errorf("audit: %s: %w", a.dir(), err)
		}
		out = append(out, a)
	}
	return out, nil
}

func (a *Audit) start(p modes.Policy, skip []string, stop <-chan struct{}) error {
	for _, pp := range p.Protected {
		if !modes.Within(pp, a.root) || pp == a.root {
			continue
		}
		if fi, err := os.Lstat(pp); a.at == "" && err == nil && fi.Mode()&os.ModeSymlink == 0 {
			a.held = append(a.held, pp)
		}
		if !inAny(pp, skip) {
			a.protected = append(a.protected, &protectedPath{rel: relTo(a.root, pp)})
		}
	}
	v, err := openView(a.root, a.at)
	if err != nil {
		return err
	}
	defer v.close()
	v.stop = stop
	fi, err := v.top.Lstat(".")
	if err != nil {
		return err
	}
	st, _ := stampOf(fi)
	a.mode = st.mode & 0o7777
	// (A directory it could not read now — a dead mount — is no reason
	// to refuse the command: what is there at the end and was not
	// recorded counts as new, and an incomplete walk then is reported.)
	prev, ok := a.cache.getUnless(a.root, stop)
	if !ok {
		return ErrStopped
	}
	sc, err := scanGit(v, nil, a.cache.settleTime(), prev, a.cache.index())
	if err != nil {
		return err
	}
	if v.stopped() {
		return ErrStopped // an abandoned walk is no record of the root
	}
	a.started = sc
	if a.at == "" {
		a.cache.put(a.root, sc)
	}
	for _, e := range sc.entries {
		a.git[e.rel] = e.st
	}
	a.gitDirs = sc.dirs
	// What the repositories' own configs make git run: read in the
	// workspace itself under a transaction's upper layer (where the
	// configs are the user's).
	base, bv := sc, v
	if a.at != "" {
		if bv, err = openView(a.root, ""); err != nil {
			return err
		}
		defer bv.close()
		if base, err = scanGit(bv, nil, a.cache.settleTime(), a.cache.get(a.root), a.cache.index()); err != nil {
			return err
		}
		a.cache.put(a.root, base)
		for g := range base.dirs {
			a.gitDirs[g] = true
		}
	}
	for _, x := range deriveExec(bv, base) {
		if !a.covered(x.rel) && !inAny(filepath.Join(a.root, x.rel), skip) {
			a.protected = append(a.protected, &protectedPath{rel: x.rel, kind: x.kind})
		}
	}
	for _, pp := range a.protected {
		pp.record(v)
	}
	return nil
}

// opOf is the op of the denial for a directory the git walk could not
// read: a protected path's when it lies in a protected name or --protect
// path (not one of git's own), else git's.
func (a *Audit) opOf(rel string) string {
	for _, pp := range a.protected {
		if pp.kind == protNamed && modes.Within(rel, pp.rel) && !slices.Contains(modes.DefaultProtected(), pp.rel) {
			return pp.op()
		}
	}
	return "git-control"
}

// covered reports whether rel lies in a protected path already.
func (a *Audit) covered(rel string) bool {
	for _, pp := range a.protected {
		if pp.kind != protHookNames && modes.Within(rel, pp.rel) {
			return true
		}
	}
	return false
}

// dir is the directory the audit reads.
func (a *Audit) dir() string {
	if a.at != "" {
		return a.at
	}
	return a.root
}

// Finish neutralizes what changed, recording each entry it neutralized in
// denials. Every process of the command must be gone. kernelHeld says the
// protected paths were read-only in the kernel for the whole run (a
// complete mount view, or a carved Landlock ruleset).
func Finish(audits []*Audit, denials *facts.Log, kernelHeld bool) {
	for _, a := range audits {
		a.finish(denials, kernelHeld)
	}
}

func (a *Audit) finish(denials *facts.Log, kernelHeld bool) {
	fail := func() {
		denials.Add(facts.Denial{Op: "git-control", Path: a.root, Syscall: "post-run", Errno: "EIO"})
	}
	v, err := openView(a.root, a.at)
	if errors.Is(err, fs.ErrPermission) && a.restoreRoot(denials) {
		v, err = openView(a.root, a.at)
	}
	if err != nil {
		// The root itself is gone or unreadable: nothing there for
		// anything to run, but say so.
		fail()
		return
	}
	defer v.close()
	record := a.cache != nil && a.at == ""
	var settle time.Duration
	if record {
		settle = a.cache.settleTime()
	}
	sc, err := scanGit(v, a.gitDirs, settle, a.started, a.cache.index())
	if errors.Is(err, fs.ErrPermission) && a.restoreRoot(denials) {
		sc, err = scanGit(v, a.gitDirs, settle, a.started, a.cache.index())
	}
	if err != nil {
		fail()
		return
	}
	if record {
		// (What is set aside below changes its directory: those
		// records no longer hold, and say so.)
		a.cache.put(a.root, sc)
	}
	n := &neutralizer{a: a, v: v, denials: denials}
	if sc.err != nil {
		fail() // and neutralize what was found
	}
	held := func(rel string) bool { return kernelHeld && a.holds(filepath.Join(a.root, rel)) }
	// Git's control entries first, judged by git's rules (a new config
	// of allowlisted keys, a sample hook are inert); the protected paths'
	// walk leaves them to this one.
	control := map[string]bool{}
	var bad []gitEntry
	for _, e := range sc.entries {
		control[e.rel] = true
		if held(e.rel) {
			continue
		}
		old, ok := a.git[e.rel]
		if e.kind != gitUnreadable && (ok && old == e.st || gitInert(v, sc, e)) {
			continue
		}
		if e.kind == gitUnreadable && ok && old == e.st && setAside(e.rel) {
			continue // set aside by an earlier run, untouched since the start
		}
		bad = append(bad, e)
	}
	for _, e := range bad {
		op := "git-control"
		if e.kind == gitUnreadable {
			op = a.opOf(e.rel)
		}
		n.neutralize(op, e.rel, e.kind == gitUnreadable)
	}
	for _, pp := range a.protected {
		for _, c := range pp.changed(v, func(rel string) bool { return control[rel] || held(rel) || n.done(rel) }) {
			n.neutralize(pp.op(), c.rel, c.unreadable)
		}
	}
}

// neutralizer neutralizes the entries of one audit's Finish.
type neutralizer struct {
	a       *Audit
	v       *view
	denials *facts.Log
	gone    []string // what it neutralized, and where that went
}

// done reports whether rel lies in what was neutralized already.
func (n *neutralizer) done(rel string) bool {
	for _, g := range n.gone {
		if modes.Within(rel, g) {
			return true
		}
	}
	return false
}

// neutralize renames rel aside (or, in a transaction's upper layer, removes
// it), and records the denial.
func (n *neutralizer) neutralize(op, rel string, unreadable bool) {
	if n.done(rel) {
		return
	}
	var errno, dst string
	if n.a.at == "" {
		errno, dst = quarantine(n.v.top, rel)
	} else {
		errno = remove(n.v.top, rel)
	}
	n.gone = append(n.gone, rel)
	if dst != "" {
		n.gone = append(n.gone, dst)
	}
	d := facts.Denial{Op: op, Path: filepath.Join(n.a.root, rel), Syscall: "post-run", Errno: errno}
	if unreadable {
		d.Reason = "unreadable"
	}
	n.denials.Add(d)
}

// restoreRoot gives the directory the audit reads back the mode it had at
// the start, when that let its owner read and search it and this uid, its
// owner, now cannot (the command took the permission away; a root cannot be
// set aside), and records it. It reports whether it did.
func (a *Audit) restoreRoot(denials *facts.Log) bool {
	if a.mode&0o500 != 0o500 {
		return false
	}
	fd, err := unix.Open(a.dir(), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || int(st.Uid) != os.Geteuid() {
		return false
	}
	// (fchmod refuses an O_PATH descriptor; its /proc link is the
	// directory itself, whatever its path now is.)
	if unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), a.mode) != nil {
		return false
	}
	denials.Add(facts.Denial{Op: "git-control", Path: a.root, Syscall: "post-run", Errno: "EPERM", Reason: "unreadable"})
	return true
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

// setAside reports whether rel is named as quarantine names what it sets
// aside.
func setAside(rel string) bool {
	name, n, found := strings.Cut(path.Base(rel), ".dsh-quarantined")
	return found && name != "" && (n == "" || len(n) > 1 && n[0] == '.' && strings.Trim(n[1:], "0123456789") == "")
}

// quarantine renames rel aside, or removes it when it cannot be renamed,
// and returns the errno recorded with the fact and where it went ("":
// removed or left). A directory that does not let its owner write in it
// (the command, as its owner, took the permission away so that nothing in
// it could be renamed) is made writable for the rename, then given its
// mode back.
func quarantine(root *os.Root, rel string) (errno, dst string) {
	for i := 0; i < 100; i++ {
		dst := rel + ".dsh-quarantined"
		if i > 0 {
			dst += "." + strconv.Itoa(i)
		}
		if _, err := root.Lstat(dst); err == nil {
			continue
		}
		err := root.Rename(rel, dst)
		if errors.Is(err, fs.ErrPermission) {
			err = withWritable(root, path.Dir(rel), func() error { return root.Rename(rel, dst) })
		}
		if err == nil {
			return "EPERM", dst
		}
		break
	}
	if err := withWritable(root, path.Dir(rel), func() error { return removeAll(root, rel) }); err != nil {
		return "EIO", "" // left in place: the denial says so
	}
	return "EPERM", ""
}

// remove removes rel from a transaction's upper layer (the path reverts to
// the workspace's) and returns the errno recorded with the fact.
func remove(root *os.Root, rel string) string {
	if err := withWritable(root, path.Dir(rel), func() error { return removeAll(root, rel) }); err != nil {
		return "EIO"
	}
	return "EPERM"
}

// removeAll removes rel and everything beneath it, first giving its owner
// the permissions that takes on each directory (one the command made
// unreadable or read-only).
func removeAll(root *os.Root, rel string) error {
	if root.RemoveAll(rel) == nil {
		return nil
	}
	var open func(string)
	open = func(d string) {
		fi, err := root.Lstat(d)
		if err != nil || !fi.IsDir() {
			return
		}
		if root.Chmod(d, fi.Mode().Perm()|0o700) != nil {
			return
		}
		f, err := root.OpenFile(d, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return
		}
		names, _ := f.Readdirnames(-1)
		f.Close()
		for _, n := range names {
			open(path.Join(d, n))
		}
	}
	open(rel)
	return root.RemoveAll(rel)
}

// withWritable runs f; if the directory dir does not let its owner write
// and search it and f fails for want of permission, it adds those to dir's
// mode, runs f again and puts the mode back.
func withWritable(root *os.Root, dir string, f func() error) error {
	err := f()
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	fi, serr := root.Lstat(dir)
	if serr != nil || !fi.IsDir() || fi.Mode().Perm()&0o300 == 0o300 {
		return err
	}
	if root.Chmod(dir, fi.Mode().Perm()|0o300) != nil {
		return err
	}
	defer root.Chmod(dir, fi.Mode().Perm())
	return f()
}
