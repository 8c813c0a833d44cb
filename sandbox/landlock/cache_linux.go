//go:build linux

package landlock

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/vouch"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Cache keeps the rulesets it derived, each with what its derivation and
// build read of the filesystem (reads), so that the next command of the
// same policy, ABI and options builds the kept rules instead of deriving
// them again (stating ~54 deny-read paths, reading the mount table,
// listing "/", /etc and the home: ~0.5 ms on this project's machine). A
// derivation is reused only while everything it was made from still
// holds, checked on every use: each path's identity or existence (a stat
// each), each listed directory's identity and change time, and the mount
// table (a poll). A derivation whose reads cannot vouch for themselves is
// not kept (see reads.lost).
//
// Each command gets a ruleset of its own, built anew: the runner adds the
// rules of the mounts its view makes (a fresh devpts, a cache's overlay)
// to the ruleset it gets, so a built ruleset is never shared. The zero
// value is ready to use, and one Cache serves any number of goroutines.
type Cache struct {
	// settle is how far before a derivation a listed directory's change
	// time must lie (0: vouch.Settle; tests shorten it).
	settle time.Duration
	mu     sync.Mutex
	// entries, the most recently used first: at most cacheEntries.
	entries []*entry
}

// cacheEntries bounds the derivations a Cache keeps: the policies an
// agent's session switches between (a mode or two, a few extra roots).
const cacheEntries = 8

// entry is one kept derivation.
type entry struct {
	key  string
	rs   Ruleset
	seen *reads
}

// Build returns the ruleset ForABIWith(p, v, o) derives, built
// (Ruleset.Build): a new ruleset, the caller's to add rules to and close.
// Its rules are those of a kept derivation when everything that one was
// made from still holds. A nil Cache derives every time.
func (c *Cache) Build(p modes.Policy, v int, o Options) (Ruleset, *os.File, error) {
	if c == nil {
		rs := ForABIWith(p, v, o)
		f, err := rs.Build()
		return rs, f, err
	}
	k := cacheKey(p, v, o)
	if rs, ok := c.reuse(k); ok {
		f, err := rs.Build()
		return rs, f, err
	}
	settle := c.settle
	if settle == 0 {
		settle = vouch.Settle
	}
	rec := &reads{before: time.Now().Add(-settle)}
	rs := derive(p, v, o, rec)
	f, err := rs.build(rec)
	if err != nil || rec.lost {
		rec.close()
		return rs, f, err
	}
	c.keep(&entry{key: k, rs: rs, seen: rec})
	return rs, f, nil
}

// reuse returns the derivation kept under k, when there is one and
// everything it was made from still holds; one that no longer holds is
// dropped.
func (c *Cache) reuse(k string) (Ruleset, bool) {
	c.mu.Lock()
	i := slices.IndexFunc(c.entries, func(e *entry) bool { return e.key == k })
	if i < 0 {
		c.mu.Unlock()
		return Ruleset{}, false
	}
	e := c.entries[i]
	copy(c.entries[1:i+1], c.entries[:i])
	c.entries[0] = e
	c.mu.Unlock()
	if e.seen.holds() {
		return e.rs, true
	}
	c.drop(e)
	return Ruleset{}, false
}

// keep adds e in front, in place of any entry of its key, and closes what
// falls beyond cacheEntries.
func (c *Cache) keep(e *entry) {
	c.mu.Lock()
	var out []*entry
	c.entries = slices.DeleteFunc(c.entries, func(x *entry) bool {
		if x.key == e.key {
			out = append(out, x)
			return true
		}
		return false
	})
	c.entries = append([]*entry{e}, c.entries...)
	if len(c.entries) > cacheEntries {
		out = append(out, c.entries[cacheEntries:]...)
		c.entries = c.entries[:cacheEntries]
	}
	c.mu.Unlock()
	for _, x := range out {
		x.seen.close()
	}
}

// drop removes e, when it is still kept, and closes it.
func (c *Cache) drop(e *entry) {
	c.mu.Lock()
	i := slices.Index(c.entries, e)
	if i >= 0 {
		c.entries = slices.Delete(c.entries, i, i+1)
	}
	c.mu.Unlock()
	if i >= 0 {
		e.seen.close()
	}
}

// Close closes the kept derivations' mount tables. The cache stays
// usable.
func (c *Cache) Close() error {
	c.mu.Lock()
	out := c.entries
	c.entries = nil
	c.mu.Unlock()
	for _, e := range out {
		e.seen.close()
	}
	return nil
}

// cacheKey encodes what ForABIWith reads of p, v and o.
func cacheKey(p modes.Policy, v int, o Options) string {
	var b strings.Builder
	field := func(s string) { b.WriteString(s); b.WriteByte(0) }
	list := func(l []string) {
		field(strconv.Itoa(len(l)))
		for _, s := range l {
			field(s)
		}
	}
	field(p.Mode.String())
	field(strconv.FormatBool(p.Network))
	field(p.Workspace)
	list(p.WritableRoots)
	list(p.DenyRead)
	list(p.Protected)
	field(strconv.Itoa(v))
	field(strconv.FormatBool(o.CarveProtected))
	field(strconv.FormatBool(o.OwnLoopback))
	field(strconv.FormatBool(o.SupervisedBinds))
	ports := make([]string, len(o.ConnectTCP))
	for i, port := range o.ConnectTCP {
		ports[i] = strconv.Itoa(int(port))
	}
	list(ports)
	list(o.WritableDirs)
	return b.String()
}

// reads is what deriving and building one ruleset read of the filesystem,
// each read kept as a fact that checks itself (holds):
//
//   - the existence of each deny-read path (Masked) and each carved
//     candidate (Carved);
//   - each directory listed (grantBeneath): its identity and change time,
//     which vouch for its entries, and so for the rules on them;
//   - the identity of every other rule's path (or that there is none);
//   - the mount table (deviceMounts; a mount also changes what a path's
//     rule binds to), kept open: the kernel marks it at its next change.
//
// Whatever changes one of those (a new ~/.ssh, a replaced workspace, a
// package adding a file to /etc, a mount) makes the ruleset be derived
// anew.
type reads struct {
	// before is when the derivation began less the settle time: a
	// directory's change time vouches only when it lies before
	// (vouch.Vouches).
	before time.Time
	facts  []fact
	// mounts is /proc/self/mountinfo, open since before it was read:
	// poll(2) reports POLLPRI after any mount or unmount since in this
	// mount namespace. mountsChanged is set once a poll said so (a poll
	// reports each change once); mu serializes both with close.
	mu            sync.Mutex
	mounts        *os.File
	mountsChanged bool
	// lost: a read cannot vouch for itself (a directory not listed, one
	// changed since before, one on a filesystem whose change
	// times do not vouch, a mount table that could not be opened), so
	// the derivation must not be reused.
	lost bool
}

// fact is one read of a path: by stat(2) (follow) or lstat(2).
type fact struct {
	path   string
	follow bool
	// absent: the read failed (there was nothing there to use).
	absent bool
	// existence: only whether there is something matters (absent), not
	// what.
	existence bool
	dev, ino  uint64
	mode      uint32
	// ctime is a listed directory's change time (listed: set).
	ctime  unix.Timespec
	listed bool
}

// holds reports whether a read of f's path now gives what it gave.
func (f *fact) holds() bool {
	var st unix.Stat_t
	var err error
	if f.follow {
		err = unix.Stat(f.path, &st)
	} else {
		err = unix.Lstat(f.path, &st)
	}
	if err != nil || f.absent {
		return (err != nil) == f.absent
	}
	if f.existence {
		return true
	}
	return st.Dev == f.dev && st.Ino == f.ino && st.Mode&unix.S_IFMT == f.mode&unix.S_IFMT &&
		(!f.listed || st.Ctim == f.ctime)
}

// holds reports whether every read r kept still gives what it gave.
func (r *reads) holds() bool {
	r.mu.Lock()
	if !r.mountsChanged {
		pfd := []unix.PollFd{{Fd: int32(r.mounts.Fd()), Events: unix.POLLPRI}}
		n, err := unix.Poll(pfd, 0)
		r.mountsChanged = err != nil || n != 0 && pfd[0].Revents&(unix.POLLPRI|unix.POLLERR|unix.POLLNVAL) != 0
	}
	changed := r.mountsChanged
	r.mu.Unlock()
	if changed {
		return false
	}
	for i := range r.facts {
		if !r.facts[i].holds() {
			return false
		}
	}
	return true
}

func (r *reads) close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.mounts != nil {
		r.mounts.Close()
		r.mounts = nil
	}
	r.mountsChanged = true
	r.mu.Unlock()
}

// exists reports whether (l)stat finds something at path, kept when r is
// not nil.
func (r *reads) exists(path string, follow bool) bool {
	var st unix.Stat_t
	var err error
	if follow {
		err = unix.Stat(path, &st)
	} else {
		err = unix.Lstat(path, &st)
	}
	if r != nil {
		r.facts = append(r.facts, fact{path: path, follow: follow, absent: err != nil, existence: true})
	}
	return err == nil
}

// absent keeps that there is nothing at path (stat).
func (r *reads) absent(path string) {
	if r != nil {
		r.facts = append(r.facts, fact{path: path, follow: true, absent: true})
	}
}

// inode keeps the identity of path, st as (l)stat gives it.
func (r *reads) inode(path string, follow bool, st *unix.Stat_t) {
	if r != nil {
		r.facts = append(r.facts, fact{path: path, follow: follow, dev: st.Dev, ino: st.Ino, mode: st.Mode})
	}
}

// readDir is os.ReadDir, the directory's identity and change time kept
// when r is not nil.
func (r *reads) readDir(dir string) ([]os.DirEntry, error) {
	if r == nil {
		return os.ReadDir(dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		r.lost = true
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	var sf unix.Statfs_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		r.lost = true
		return nil, err
	}
	if unix.Fstatfs(int(f.Fd()), &sf) != nil || !vouch.Vouches(&st, &sf, r.before) {
		r.lost = true
	}
	r.facts = append(r.facts, fact{path: dir, follow: true, dev: st.Dev, ino: st.Ino, mode: st.Mode, ctime: st.Ctim, listed: true})
	ents, err := f.ReadDir(-1)
	if err != nil {
		r.lost = true
		return nil, err
	}
	slices.SortFunc(ents, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, nil
}

// openMounts opens /proc/self/mountinfo; r, when not nil, keeps it open
// (the caller then must not close it). Kept, it is opened in blocking mode
// (os.NewFile of a blocking descriptor), so that Go's netpoller does not
// watch it: an epoll_wait of the runtime's would take the kernel's one
// report of a mount change (it polls the file, which clears it) before
// holds does.
func (r *reads) openMounts() (*os.File, error) {
	if r == nil {
		return os.Open("/proc/self/mountinfo")
	}
	fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.lost = true
		return nil, &os.PathError{Op: "open", Path: "/proc/self/mountinfo", Err: err}
	}
	r.mounts = os.NewFile(uintptr(fd), "/proc/self/mountinfo")
	return r.mounts, nil
}
