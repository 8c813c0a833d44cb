//go:build linux

package audit

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// index is an inotify instance of a Cache that watches the directories its
// walks recorded, so that a later walk knows, without a system call, which
// of them changed since: a directory whose watch reported nothing since its
// record was taken holds the entries recorded (dirRecord.wd, seq).
//
// The kernel queues an event while the call that changed the directory
// runs, whoever made it and through whichever mount or namespace: an entry
// made, removed or renamed in it, a change of its own mode, owner or times
// (and of an entry's: more than needed), its removal or move. So once every
// process of a command is gone and the queue is read to its end (drain), a
// directory that shows no event since its record is unchanged. Where the
// queue overflowed the events lost could be any: no record taken before
// the overflow is vouched for. A directory is only watched on a local
// filesystem whose every change passes through its own inodes
// (watchableFS: not overlayfs, whose layers can be changed beside it). A
// directory reached by a descriptor is vouched for only with its recorded
// identity and change time too: a filesystem that reuses inode numbers
// while the first is alive cannot pass another directory off as it.
//
// A mount shows no event in the directory it covers, so the index also
// watches this process's mount table (poll on /proc/self/mountinfo): a
// mount or unmount anywhere in it counts as lost events. (The sandbox's
// own mounts are made in namespaces of their own.)
//
// Watches cost the user's inotify budget, which the user's editors and
// build tools share: an index takes at most a quarter of it
// (fs.inotify.max_user_watches), and once the kernel refuses one, no more
// than it holds then for a while (retryWatches); the directories beyond
// are recorded by their change time alone. A directory a root's walk no
// longer finds (removed, moved out, or beyond a path now left out) loses
// its watch when the walk is kept (prune).
type index struct {
	mu      sync.RWMutex
	fd      int
	mounts  int    // /proc/self/mountinfo
	seq     uint64 // events read so far: the order of events and records
	lost    uint64 // seq at the last overflow: records before it vouch for nothing
	watches map[int32]*dirWatch
	byID    map[dirID]int32 // the watch of each directory watched
	// rootLast is the seq of the last event of a directory of each
	// audited root, anyLast of one whose root is not known (an unknown
	// watch, a directory moved since, or in two roots): see rootClean.
	rootLast map[string]uint64
	anyLast  uint64
	// perRoot counts the watches of each root's directories (not
	// shared): more than a walk's records use says prune has work.
	perRoot map[string]int
	budget  int       // watches it may hold
	max     int       // watches it may hold now: less than budget after an ENOSPC
	retry   time.Time // when max is budget again
	broken  bool      // closed, or a read failed: vouches for nothing
	buf     []byte
}

// dirID is a directory's identity.
type dirID struct{ dev, ino uint64 }

// dirWatch is one directory's watch: the directory's identity, the seq of
// its last event, and the audited root a walk found it in (shared: more
// than one; moved: moved since).
type dirWatch struct {
	id            dirID
	last          uint64
	root          string
	shared, moved bool
}

// retryWatches is how long an index that the kernel refused a watch
// (ENOSPC: the user's budget spent, by it or by other programs) holds no
// more watches than it had then.
const retryWatches = time.Minute

// watchMask is what changes a directory's entries, mode or identity (with
// IN_ATTRIB, an entry's attributes too: a harmless excess).
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// newIndex starts an index, or returns nil where the kernel gives none.
func newIndex() *index {
	mounts, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		unix.Close(mounts)
		return nil
	}
	budget := 8192 // the kernel's default before 5.11
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			budget = n
		}
	}
	return &index{fd: fd, mounts: mounts, watches: map[int32]*dirWatch{}, byID: map[dirID]int32{},
		rootLast: map[string]uint64{}, perRoot: map[string]int{}, budget: budget / 4, max: budget / 4, buf: make([]byte, 64<<10)}
}

// close removes every watch.
func (x *index) close() {
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.fd >= 0 {
		unix.Close(x.fd)
		unix.Close(x.mounts)
	}
	x.fd, x.mounts, x.broken, x.watches, x.byID = -1, -1, true, nil, nil
}

// watch watches the directory dirfd, found in the audited root root, and
// returns its watch and the seq a record of what is read of it from now on
// carries, with its stat, taken after the watch was set: wd 0 when it is
// not watched (the budget spent, the kernel refused).
func (x *index) watch(dirfd int, st *unix.Stat_t, root string) (wd int32, seq uint64, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.broken || !x.room(dirfd, st) {
		return 0, 0, unix.Fstat(dirfd, st)
	}
	w, err := unix.InotifyAddWatch(x.fd, "/proc/self/fd/"+strconv.Itoa(dirfd), watchMask)
	switch {
	case err == unix.ENOSPC:
		x.max, x.retry = len(x.watches), time.Now().Add(retryWatches)
	case err != nil:
		// (No /proc: no watch will ever be set.)
		x.broken = true
	}
	if w <= 0 {
		return 0, 0, unix.Fstat(dirfd, st)
	}
	wd = int32(w)
	d := x.watches[wd]
	if err := unix.Fstat(dirfd, st); err != nil || d == nil && len(x.watches) >= x.max {
		// (At the budget, room let it try as a directory watched,
		// whose number another has since: a watch of its own is
		// more than the budget.)
		if d == nil {
			unix.InotifyRmWatch(x.fd, uint32(w))
		}
		return 0, 0, err
	}
	id := dirID{st.Dev, st.Ino}
	if d != nil && d.id != id {
		// A number the kernel gave again: what was read for it is the
		// old directory's.
		x.forget(wd)
		d = nil
	}
	if d == nil {
		d = &dirWatch{id: id, last: x.seq}
		x.watches[wd], x.byID[id] = d, wd
	} else if d.root != root && !d.shared {
		x.perRoot[d.root]--
		d.shared = true
	}
	if d.root == "" && !d.shared {
		x.perRoot[root]++
	}
	if !d.shared {
		d.root = root
	}
	// (Moved, it is found again where it is now.)
	d.moved = false
	return wd, x.seq, nil
}

// room reports whether the index may watch the directory dirfd: under the
// budget, or at it (st then its stat) when the directory is watched already
// (its watch is added again, at no cost).
func (x *index) room(dirfd int, st *unix.Stat_t) bool {
	if len(x.watches) >= x.max && x.max < x.budget && time.Now().After(x.retry) {
		x.max = x.budget
	}
	if len(x.watches) < x.max {
		return true
	}
	return unix.Fstat(dirfd, st) == nil && x.byID[dirID{st.Dev, st.Ino}] != 0
}

// forget drops the watch wd from the index's books (the kernel removed it,
// or is told to).
func (x *index) forget(wd int32) {
	d := x.watches[wd]
	if d == nil {
		return
	}
	delete(x.watches, wd)
	if x.byID[d.id] == wd {
		delete(x.byID, d.id)
	}
	if d.root != "" && !d.shared {
		x.perRoot[d.root]--
	}
}

// prune removes the watches of root's directories that the walk sc, the
// one kept for root, has no record with: what its walks no longer find. A
// record of another walk of root (one running at the same time) may use
// one: the change it could then miss is marked as root's, so no walk of
// root that began before is taken whole again, and its records with a
// watch removed vouch for nothing (unchanged).
func (x *index) prune(root string, sc *gitScan) {
	x.mu.Lock()
	defer x.mu.Unlock()
	used := 0
	for _, r := range sc.read {
		if r.wd != 0 {
			used++
		}
	}
	if x.broken || x.fd < 0 || x.perRoot[root] <= used {
		return
	}
	keep := make(map[int32]bool, used)
	for _, r := range sc.read {
		if d := x.watches[r.wd]; d != nil && d.id == (dirID{r.dev, r.ino}) {
			keep[r.wd] = true
		}
	}
	removed := false
	for wd, d := range x.watches {
		if d.root == root && !d.shared && !keep[wd] {
			unix.InotifyRmWatch(x.fd, uint32(wd))
			x.forget(wd)
			removed = true
		}
	}
	if removed {
		x.seq++
		x.rootLast[root] = x.seq
	}
}

// drain reads every event queued and returns the seq of the last.
func (x *index) drain() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.broken {
		// (The poll itself takes note of the table it reports.)
		p := []unix.PollFd{{Fd: int32(x.mounts), Events: unix.POLLPRI}}
		n, err := unix.Poll(p, 0)
		switch {
		case err != nil && err != unix.EINTR:
			x.broken = true
		case err != nil || n > 0 && p[0].Revents != 0:
			x.seq++
			x.lost = x.seq
		}
	}
	for !x.broken {
		n, err := unix.Read(x.fd, x.buf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			break
		}
		if err != nil || n <= 0 {
			x.broken = true
			break
		}
		for b := x.buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
			wd := int32(binary.NativeEndian.Uint32(b[0:4]))
			mask := binary.NativeEndian.Uint32(b[4:8])
			size := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:16]))
			if size > len(b) {
				x.broken = true
				break
			}
			b = b[size:]
			x.seq++
			if mask&unix.IN_Q_OVERFLOW != 0 {
				x.lost = x.seq
				continue
			}
			d := x.watches[wd]
			switch {
			case d == nil:
				// A watch removed (prune; IN_IGNORED follows), or
				// one never kept (its directory failed its stat).
				if mask&unix.IN_IGNORED == 0 {
					x.anyLast = x.seq
				}
				continue
			case d.root == "" || d.shared || d.moved:
				x.anyLast = x.seq
			default:
				x.rootLast[d.root] = x.seq
			}
			d.last = x.seq
			if mask&unix.IN_MOVE_SELF != 0 {
				d.moved = true
			}
			if mask&unix.IN_IGNORED != 0 {
				x.forget(wd)
			}
		}
	}
	return x.seq
}

// rootClean reports whether no directory of the audited root root changed
// since seq: no event of a watch a walk found there, nor of one whose root
// is not known, and no event lost.
func (x *index) rootClean(root string, seq uint64) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return !x.broken && x.lost <= seq && x.anyLast <= seq && x.rootLast[root] <= seq
}

// live reports whether the directory r recorded is still watched (changed
// or not).
func (x *index) live(r *dirRecord) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	d := x.watches[r.wd]
	return !x.broken && r.wd != 0 && d != nil && d.id == dirID{r.dev, r.ino}
}

// unchanged reports whether the directory r recorded showed no event since
// its record was taken (events read by the last drain).
func (x *index) unchanged(r *dirRecord) bool {
	if x == nil || r == nil || r.wd == 0 {
		return false
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.broken || r.seq < x.lost {
		return false
	}
	d := x.watches[r.wd]
	return d != nil && d.id == dirID{r.dev, r.ino} && d.last <= r.seq
}
