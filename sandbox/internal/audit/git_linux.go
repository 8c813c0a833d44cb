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
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/vouch"
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
	// read are the directories a recording walk read (see dirRecord),
	// by path relative to the root.
	read map[string]*dirRecord
	// listed counts the directories the walk listed (the rest it took
	// from an earlier walk's records).
	listed int
	// whole says the walk watched every directory it visited (with an
	// index) from before it read it, and found nothing it could not read:
	// while the index reports no change in the root after seq (its count
	// of events when the walk began), the root's directories hold what
	// the walk found — the directories that look like git directories
	// (looks) and the .git entries that are not directories (ptrs) — and
	// the next walk takes them from here (gitWalk.reuse).
	whole       bool
	seq         uint64
	looks, ptrs []string
	// watched is the root's name in the index the walk used ("": none),
	// reused says the walk took prev's findings whole (reuse).
	watched string
	reused  bool
}

// dirRecord is what a walk read of one directory: its identity and change
// time, taken before its entries were read, and the entries the walk looks
// at (dirent). The kernel sets a directory's change time whenever an entry
// is made, removed or renamed in it and whenever its own mode or owner
// changes, and no unprivileged call can set it back: a directory whose
// identity and change time are what they were holds the same entries, and
// the end's walk takes them from the record instead of reading them again —
// and a directory of no entries it looks at, unchanged, it does not open at
// all. So the end's walk costs a stat per unchanged directory, not a read.
// Recorded only where that holds (vouch.LocalFS), and its change time vouches
// only for directories whose change time lay more than a settle time
// (recentCTime) before the walk began (ctimeOK): a kernel with coarse
// timestamps gives a change made within the same tick the same time.
//
// A walk of a Cache that watches (index) also watches each directory it
// records, before it reads it: wd is the watch, seq the index's count of
// events at that moment. While the watch reports nothing after seq, the
// record holds whatever the change time — and the walk does not even stat
// the directory when its parent holds too (see walker.dir).
type dirRecord struct {
	dev, ino uint64
	ctime    unix.Timespec
	ctimeOK  bool
	ents     []dirent
	wd       int32
	seq      uint64
}

// recentCTime is how far before a walk a directory's change time must lie
// for the walk to record it.
const recentCTime = vouch.Settle

// same reports whether st shows the directory r recorded, unchanged by its
// change time.
func (r *dirRecord) same(st *unix.Stat_t) bool {
	return r.ctimeOK && r.is(st)
}

// is reports whether st is the directory r recorded, with the change time
// recorded: its identity (the same change time too, since another
// directory can come to have the number of one recorded, on a filesystem
// that reuses them while the first is alive). Whether that time vouches for
// the directory is same's question.
func (r *dirRecord) is(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Dev == r.dev && st.Ino == r.ino && st.Ctim == r.ctime
}

// watchableFS reports whether every change of a directory of the local
// filesystem of sf (vouch.LocalFS) is made through its own inodes, so that a
// watch sees it: not overlayfs, whose layers' directories can be changed
// beside it, which its inodes' watches do not see (their change times,
// the upper layer's, do show).
func watchableFS(sf *unix.Statfs_t) bool {
	return vouch.LocalFS(sf) && sf.Type != unix.OVERLAYFS_SUPER_MAGIC
}

// scanGit walks the whole view v, taking the directories of forced for git
// directories whatever they hold (those found at the start). With a
// positive settle (and a root read as it is, not a transaction's layers),
// it records what it read of each directory (gitScan.read), its change
// time vouching for it where it lies more than settle before the walk, and
// idx (nil: none) watching it; given prev, such records of an earlier walk,
// it takes an unchanged directory's entries from there. The error is the
// root's own: nothing was read.
func scanGit(v *view, forced map[string]bool, settle time.Duration, prev *gitScan, idx *index) (*gitScan, error) {
	top, err := unix.Open(v.topPath, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: v.topPath, Err: err}
	}
	workers := walkWorkers()
	if v.stop != nil {
		workers = 1 // beside a command: the other CPUs are the command's
	}
	w := &gitWalk{
		v: v, forced: forced, workers: workers,
		sc:     &gitScan{dirs: map[string]bool{}, pointers: map[string]string{}},
		listed: map[gitEntryKey]bool{}, local: map[uint64]fsKind{},
	}
	var seq uint64
	if v.lower == nil {
		if prev != nil {
			w.prev = prev.read
		}
		if idx != nil && (prev != nil || settle > 0) {
			// Every change made before now, read: what shows no
			// event since its record is unchanged.
			seq = idx.drain()
			w.idx = idx
			w.sc.watched = v.topPath
		}
		if settle > 0 {
			w.sc.read = make(map[string]*dirRecord, len(w.prev))
			w.before = time.Now().Add(-settle)
		}
	}
	w.more = sync.NewCond(&w.qmu)
	if err := searchable(top); err != nil {
		unix.Close(top)
		return nil, &os.PathError{Op: "open", Path: v.topPath, Err: err}
	}
	if w.idx != nil && w.sc.read != nil && prev != nil && prev.whole && w.idx.rootClean(v.topPath, prev.seq) && w.reuse(top, prev) {
		unix.Close(top)
	} else {
		w.run(walkTask{fd: top, rel: ".", lowerVis: v.lower != nil})
	}
	// What a pointer names is a git directory, whatever it holds; and
	// what its own commondir names in turn.
	k := w.walker()
	for i := 0; i < len(w.pending); i++ {
		if t := w.pending[i]; !w.sc.dirs[t] {
			k.inspect(t)
		}
	}
	w.sc.whole = w.idx != nil && w.sc.read != nil && !w.partial.Load()
	w.sc.seq = seq
	// Parents first, whichever worker found them: Finish sets a parent
	// aside before it looks at what is in it.
	slices.SortFunc(w.sc.entries, func(a, b gitEntry) int {
		if c := strings.Compare(a.rel, b.rel); c != 0 {
			return c
		}
		return int(a.kind) - int(b.kind)
	})
	return w.sc, nil
}

// reuse takes what the walk prev found in the root (top, its descriptor)
// instead of walking it, where the index says no directory of it changed
// since: every directory and entry it found is where it was. What a
// directory's events do not show — what git's control entries and pointers
// hold, and the hooks' names — it reads again: the control entries of
// every git directory (by name or content at prev's walk, or forced and
// there then), and every .git entry that is not a directory. False when
// the root is not prev's directory: nothing was done.
func (w *gitWalk) reuse(top int, prev *gitScan) bool {
	var st unix.Stat_t
	if r := prev.read["."]; r == nil || unix.Fstat(top, &st) != nil || !r.is(&st) {
		return false
	}
	// (Shared with prev, never changed: an append would copy.)
	w.sc.read, w.sc.looks, w.sc.ptrs = prev.read, slices.Clip(prev.looks), slices.Clip(prev.ptrs)
	w.sc.reused = true
	k := w.walker()
	for _, rel := range prev.looks {
		k.gitDir(-1, rel, openDepth)
	}
	for rel := range w.forced {
		if prev.read[rel] != nil {
			k.gitDir(-1, rel, openDepth)
		}
	}
	for _, rel := range prev.ptrs {
		if st, ok := w.entry(rel, gitPointer); ok {
			w.pointer(rel, st)
		}
	}
	return true
}

// gitWalk is one walk of an audited root, by up to walkWorkers goroutines
// (walkers) that share its findings and a stack of directories still to
// visit. Directories are opened relative to their parent's descriptor
// (openat with O_NOFOLLOW: never through a symlink) and read with
// getdents64 into the walker's buffer — a few system calls per directory and
// no allocation but the names — down to openDepth; deeper ones through the
// os.Root by path, so that a deep tree cannot exhaust descriptors. A walker
// hands a subdirectory to the stack only while another walker waits for
// work, and otherwise descends into it itself: the stack holds at most
// walkWorkers open directories.
type gitWalk struct {
	v       *view
	forced  map[string]bool
	workers int

	// prev are an earlier walk's records, to take unchanged directories'
	// entries from; before is when a directory's change time must lie
	// before for this walk to record it.
	prev   map[string]*dirRecord
	before time.Time
	// idx, when not nil, watches what this walk records and vouches for
	// what an earlier walk recorded (see index).
	idx *index

	// partial says the walk visited a directory it did not watch, or
	// failed to read one (see gitScan.whole).
	partial atomic.Bool

	mu      sync.Mutex // guards sc, listed, pending and local
	sc      *gitScan
	listed  map[gitEntryKey]bool
	pending []string          // directories pointers name
	local   map[uint64]fsKind // by device

	qmu    sync.Mutex // guards stack, active
	more   *sync.Cond // the stack grew, or the walk is over
	stack  []walkTask
	active int // walkers visiting a directory
}

// walkTask is a directory to visit: its descriptor (owned by the task), its
// path relative to the root, its depth, and whether the lower layer shows
// through it (see walker.dir). A directory the index vouches for, under a
// parent it vouched for too, has no descriptor (fd -1) but its record
// (vouched): nothing changed in it, nor what its path names.
type walkTask struct {
	fd       int
	rel      string
	depth    int
	lowerVis bool
	vouched  *dirRecord
}

// walker is one goroutine of a walk, with its own getdents buffer and the
// earlier walk's records it kept (added to the scan's when the walk ends).
type walker struct {
	w    *gitWalk
	buf  []byte
	kept []keptRecord
}

type keptRecord struct {
	rel string
	r   *dirRecord
}

func (w *gitWalk) walker() *walker { return &walker{w: w, buf: make([]byte, 64<<10)} }

// walkWorkers is how many walkers a walk runs: one per CPU the process
// may use, at most 8 (reading directories is the kernel's work, and a few
// readers keep a disk or page cache busy).
func walkWorkers() int { return min(max(runtime.GOMAXPROCS(0), 1), 8) }

// run visits first and everything under it, and returns when every walker
// is done.
func (w *gitWalk) run(first walkTask) {
	ks := make([]*walker, max(w.workers, 1))
	for i := range ks {
		ks[i] = w.walker()
	}
	defer func() {
		for _, k := range ks {
			for _, kr := range k.kept {
				w.sc.read[kr.rel] = kr.r
			}
		}
	}()
	if w.workers <= 1 {
		ks[0].dir(first)
		return
	}
	w.stack = append(w.stack, first)
	var wg sync.WaitGroup
	for _, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				t, ok := w.next()
				if !ok {
					return
				}
				k.dir(t)
				w.done()
			}
		}()
	}
	wg.Wait()
}

// next takes a directory off the stack, waiting while other walkers may
// still add one; false when the walk is over.
func (w *gitWalk) next() (walkTask, bool) {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	for len(w.stack) == 0 && w.active > 0 {
		w.more.Wait()
	}
	if len(w.stack) == 0 {
		w.more.Broadcast()
		return walkTask{}, false
	}
	t := w.stack[len(w.stack)-1]
	w.stack = w.stack[:len(w.stack)-1]
	w.active++
	return t, true
}

// done ends a walker's visit of a directory.
func (w *gitWalk) done() {
	w.qmu.Lock()
	w.active--
	if w.active == 0 && len(w.stack) == 0 {
		w.more.Broadcast()
	}
	w.qmu.Unlock()
}

// handOff gives t to a waiting walker, if one waits; false (t still the
// caller's) if none does.
func (w *gitWalk) handOff(t walkTask) bool {
	if w.workers <= 1 {
		return false
	}
	w.qmu.Lock()
	defer w.qmu.Unlock()
	if len(w.stack) >= w.workers-w.active {
		return false
	}
	w.stack = append(w.stack, t)
	w.more.Signal()
	return true
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
	w.mu.Lock()
	defer w.mu.Unlock()
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
func (k *walker) readDir(fd int, all bool) ([]dirent, error) {
	var out []dirent
	for {
		n, err := unix.Getdents(fd, k.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		for b := k.buf[:n]; len(b) >= 19; {
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
			if typ == unix.DT_UNKNOWN || typ == unix.DT_CHR && k.w.v.lower != nil {
				var st unix.Stat_t
				if err := unix.Fstatat(fd, d.name, &st, unix.AT_SYMLINK_NOFOLLOW); err == unix.EACCES {
					return nil, err // not searchable: its entries cannot be typed
				} else if err == nil {
					d.isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
					d.whiteout = k.w.v.lower != nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
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

// dir visits the directory t.fd (t.rel to the root, at t.depth) and closes
// it, and then what is under it (or hands that to another walker). lowerVis
// says that, in a transaction, the workspace's directory rel shows
// through the upper layer's.
//
// A directory that cannot be searched (a mode with r but not x) lists, but
// nothing in it can be reached: it is found so where something in it is
// looked up — a subdirectory, a control entry, an entry of an unknown type
// — which is everywhere git could find something (a directory with nothing
// of that is nothing to git).
func (k *walker) dir(t walkTask) {
	w := k.w
	fd, rel, depth, lowerVis := t.fd, t.rel, t.depth, t.lowerVis
	if w.v.stopped() {
		// Abandoned: the rest of the walk only closes what it holds.
		if fd >= 0 {
			unix.Close(fd)
		}
		w.partial.Store(true)
		return
	}
	ents, vouched := []dirent(nil), t.vouched != nil
	if vouched {
		ents = t.vouched.ents
		k.keep(rel, t.vouched)
	} else {
		var err error
		if ents, vouched, err = k.entries(fd, rel); err != nil {
			unix.Close(fd)
			w.unreadable(rel, err)
			return
		}
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
			w.mu.Lock()
			w.sc.ptrs = append(w.sc.ptrs, rel)
			w.mu.Unlock()
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
	if path.Base(rel) == ".git" || has(nHEAD, "HEAD") && (has(nCommondir, "commondir") || has(nObjects, "objects") && has(nRefs, "refs")) {
		w.mu.Lock()
		w.sc.looks = append(w.sc.looks, rel)
		w.mu.Unlock()
		k.gitDir(fd, rel, depth)
	} else if w.forced[rel] {
		k.gitDir(fd, rel, depth)
	}
	if depth >= openDepth && fd >= 0 {
		unix.Close(fd) // hold no descriptor while descending further
		fd = -1
	}
	for _, name := range subdirs {
		if w.v.stopped() {
			break
		}
		childRel := path.Join(rel, name)
		if r := w.prev[childRel]; vouched && w.idx.unchanged(r) {
			// Its parent unchanged, the name is still r's directory.
			if len(r.ents) == 0 && name != ".git" && !w.forced[childRel] {
				k.keep(childRel, r)
				continue
			}
			// (No system call to share: no hand-off.)
			k.dir(walkTask{fd: -1, rel: childRel, depth: depth + 1, lowerVis: lowerVis, vouched: r})
			continue
		}
		if fd >= 0 && k.unchangedLeaf(fd, name, childRel) {
			continue
		}
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
		child := walkTask{fd: cfd, rel: childRel, depth: depth + 1, lowerVis: lowerVis}
		if !w.handOff(child) {
			k.dir(child)
		}
	}
	if fd >= 0 {
		unix.Close(fd)
	}
}

// entries returns the entries of the directory fd (rel) the walk looks
// at: an earlier walk's record's, where the index or the change time says
// they did not change (vouched: the index said so), else read now — and
// recorded, when the walk records, as they were when the walk's stat (and
// watch) came before the read.
func (k *walker) entries(fd int, rel string) (ents []dirent, vouched bool, err error) {
	w := k.w
	var st unix.Stat_t
	if (w.prev == nil && w.sc.read == nil) || unix.Fstat(fd, &st) != nil {
		w.partial.Store(true)
		return k.list(fd)
	}
	r := w.prev[rel]
	if r != nil && r.is(&st) && w.idx.unchanged(r) {
		k.keep(rel, r)
		return r.ents, true, nil
	}
	local, watchable := w.fsOf(fd, st.Dev)
	var wd int32
	var seq uint64
	if watchable && w.idx != nil && w.sc.read != nil {
		// Watched first, stat again: what the index says from now
		// on is about what the stat and the read see.
		if wd, seq, err = w.idx.watch(fd, &st, w.v.topPath); err != nil {
			w.partial.Store(true)
			return k.list(fd)
		}
	}
	if wd == 0 {
		w.partial.Store(true)
	}
	if r != nil && r.same(&st) {
		if wd != 0 {
			r = &dirRecord{dev: r.dev, ino: r.ino, ctime: r.ctime, ctimeOK: true, ents: r.ents, wd: wd, seq: seq}
		}
		k.keep(rel, r)
		return r.ents, false, nil
	}
	if ents, _, err = k.list(fd); err == nil && local && w.sc.read != nil {
		w.record(rel, &st, ents, wd, seq)
	}
	return ents, false, err
}

// list reads the entries of the directory fd the walk looks at.
func (k *walker) list(fd int) ([]dirent, bool, error) {
	ents, err := k.readDir(fd, false)
	k.w.mu.Lock()
	k.w.sc.listed++
	k.w.mu.Unlock()
	return ents, false, err
}

// fsKind is what a filesystem's directories can be vouched for by: their
// change times (local), and watches too (watchable).
type fsKind struct{ local, watchable bool }

// fsOf returns the kind of the filesystem of the directory fd (on device
// dev): vouch.LocalFS, watchableFS.
func (w *gitWalk) fsOf(fd int, dev uint64) (local, watchable bool) {
	w.mu.Lock()
	k, ok := w.local[dev]
	w.mu.Unlock()
	if !ok {
		var sf unix.Statfs_t
		if unix.Fstatfs(fd, &sf) == nil {
			k = fsKind{vouch.LocalFS(&sf), watchableFS(&sf)}
		}
		w.mu.Lock()
		w.local[dev] = k
		w.mu.Unlock()
	}
	return k.local, k.watchable
}

// record keeps what the walk read of a directory (rel, with stat st and
// watch wd at seq, both taken before ents were read): its change time
// vouches for it where it lies before the settle time, its watch where it
// has one.
func (w *gitWalk) record(rel string, st *unix.Stat_t, ents []dirent, wd int32, seq uint64) {
	// (Changed too recently, a change within the same tick would not show.)
	ctimeOK := time.Unix(st.Ctim.Unix()).Before(w.before)
	if !ctimeOK && wd == 0 {
		return
	}
	r := &dirRecord{dev: st.Dev, ino: st.Ino, ctime: st.Ctim, ctimeOK: ctimeOK, ents: ents, wd: wd, seq: seq}
	w.mu.Lock()
	w.sc.read[rel] = r
	w.mu.Unlock()
}

// unchangedLeaf reports whether the subdirectory name of the directory
// parent (rel from the root) is one an earlier walk recorded with no entry
// the walk looks at, unchanged since: there is nothing in it to visit.
func (k *walker) unchangedLeaf(parent int, name, rel string) bool {
	w := k.w
	r := w.prev[rel]
	if r == nil || len(r.ents) > 0 || name == ".git" || w.forced[rel] {
		return false
	}
	var st unix.Stat_t
	if unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || !r.same(&st) {
		return false
	}
	if w.idx == nil || !w.idx.live(r) {
		w.partial.Store(true)
	}
	k.keep(rel, r)
	return true
}

// keep records r, an earlier walk's record of rel that still holds, when
// this walk records.
func (k *walker) keep(rel string, r *dirRecord) {
	if k.w.sc.read != nil {
		k.kept = append(k.kept, keptRecord{rel, r})
	}
}

// Cache keeps what the walks read of the audited roots' directories
// (dirRecord) from one command to the next, so that a command's walk at the
// start takes what did not change since an earlier command's from there. A
// record is a fact about a directory that checks itself (its identity and
// change time), so one cache may serve any number of commands, at once or
// one after another, and a stale record only costs a read. The zero value
// is ready to use.
//
// Set to watch (SetWatch) before its first use, the cache also watches what
// its walks record (index): a walk then takes a directory that reported no
// change from its record without a system call, and one changed a moment
// ago too. Close releases the watches.
type Cache struct {
	mu    sync.Mutex
	watch bool
	scans map[string]*gitScan // the last complete walk, by audited root
	// settle is the settle time of its walks' records (0: recentCTime;
	// a test's cache sets it, and waits for the clock instead).
	settle time.Duration
	idx    *index
	closed bool
	// listedSinceRead: a walk put since ReadRecords (or ever) listed a
	// directory, so its records may differ from those read.
	listedSinceRead bool
	// loading, when not nil, is closed once LoadRecords' records are in.
	loading chan struct{}
}

// SetWatch sets whether the cache watches what its walks record; it takes
// effect at the next walk.
func (c *Cache) SetWatch(on bool) {
	c.mu.Lock()
	c.watch = on
	c.mu.Unlock()
}

// index returns the cache's index (nil: none), started at the first call.
func (c *Cache) index() *index {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.watch {
		return nil
	}
	if c.idx == nil && !c.closed {
		c.idx = newIndex()
	}
	return c.idx
}

// Close releases the cache's watches; its records stay, vouched for by
// their change times alone.
func (c *Cache) Close() error {
	c.mu.Lock()
	idx := c.idx
	c.closed = true
	c.mu.Unlock()
	idx.close()
	return nil
}

// settleTime is the settle time of a walk that records for c: recentCTime
// without a cache too (the walk at the end takes from the start's).
func (c *Cache) settleTime() time.Duration {
	if c == nil || c.settle == 0 {
		return recentCTime
	}
	return c.settle
}

// get returns the records of root, nil with none; never changed after.
func (c *Cache) get(root string) *gitScan {
	sc, _ := c.getUnless(root, nil)
	return sc
}

// getUnless is get, given up (false) once stop is closed while it waits
// for LoadRecords' records.
func (c *Cache) getUnless(root string, stop <-chan struct{}) (*gitScan, bool) {
	if c == nil {
		return nil, true
	}
	if !c.waitLoadUnless(stop) {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.scans[root], true
}

// put replaces the last walk of root, sc, a complete walk that recorded,
// and drops the watches of what it no longer found.
func (c *Cache) put(root string, sc *gitScan) {
	if c == nil || sc.read == nil || sc.err != nil {
		return
	}
	c.waitLoad()
	c.mu.Lock()
	if c.scans == nil {
		c.scans = map[string]*gitScan{}
	}
	if sc.listed > 0 || c.scans[root] == nil {
		c.listedSinceRead = true
	}
	c.scans[root] = sc
	idx := c.idx
	c.mu.Unlock()
	if idx != nil && sc.watched != "" && !sc.reused {
		idx.prune(sc.watched, sc)
	}
}

// gitDir lists the control entries of the git directory rel (its
// descriptor fd, at depth).
func (k *walker) gitDir(fd int, rel string, depth int) {
	w := k.w
	w.mu.Lock()
	seen := w.sc.dirs[rel]
	w.sc.dirs[rel] = true
	w.mu.Unlock()
	if seen {
		return
	}
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
	hs, err := k.readDir(hfd, true)
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
func (k *walker) inspect(rel string) {
	f, err := k.w.v.top.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return // not in the top (the workspace's own, in a transaction), or read as unreadable by the walk
	}
	defer f.Close()
	k.gitDir(int(f.Fd()), rel, openDepth)
}

// pointer records what the pointer rel names.
func (w *gitWalk) pointer(rel string, st stamp) {
	t := w.v.resolvePointer(rel, st)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sc.pointers[rel] = t
	if t != "" && !w.sc.dirs[t] {
		w.pending = append(w.pending, t)
	}
}

// unreadable lists the directory rel, which the walk could not open or read
// (err), when the command could have written in it (view.couldHaveWritten).
// Any other failure makes the scan incomplete.
func (w *gitWalk) unreadable(rel string, err error) {
	w.partial.Store(true)
	if !errors.Is(err, fs.ErrPermission) || rel == "." {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
			w.incomplete(rel, err)
		}
		return
	}
	fi, lerr := w.v.top.Lstat(rel)
	if lerr != nil {
		w.incomplete(rel, err)
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

// incomplete records the first failure that makes the scan incomplete.
func (w *gitWalk) incomplete(rel string, err error) {
	w.partial.Store(true)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sc.err == nil {
		w.sc.err = fmt.Errorf("%s: %w", rel, err)
	}
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
