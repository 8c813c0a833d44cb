//go:build linux

package audit

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"sync"

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
// (fs.inotify.max_user_watches), and no more once the kernel refuses one;
// the directories beyond are recorded by their change time alone.
type index struct {
	mu      sync.RWMutex
	fd      int
	mounts  int    // /proc/self/mountinfo
	seq     uint64 // events read so far: the order of events and records
	lost    uint64 // seq at the last overflow: records before it vouch for nothing
	watches map[int32]*dirWatch
	// rootLast is the seq of the last event of a directory of each
	// audited root, anyLast of one whose root is not known (not yet
	// watched by a walk, moved since, or in two roots): see rootClean.
	rootLast map[string]uint64
	anyLast  uint64
	max      int  // watches it may hold
	broken   bool // closed, or a read failed: vouches for nothing
	buf      []byte
}

// dirWatch is one directory's watch: the directory's identity, the seq of
// its last event, and the audited root a walk found it in (shared: more
// than one; moved: moved since).
type dirWatch struct {
	dev, ino      uint64
	last          uint64
	root          string
	shared, moved bool
}

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
	return &index{fd: fd, mounts: mounts, watches: map[int32]*dirWatch{}, rootLast: map[string]uint64{}, max: budget / 4, buf: make([]byte, 64<<10)}
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
	x.fd, x.mounts, x.broken, x.watches = -1, -1, true, nil
}

// watch watches the directory dirfd, found in the audited root root, and
// returns its watch and the seq a record of what is read of it from now on
// carries, with its stat, taken after the watch was set: wd 0 when it is
// not watched (the budget spent, the kernel refused).
func (x *index) watch(dirfd int, st *unix.Stat_t, root string) (wd int32, seq uint64, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.broken || len(x.watches) >= x.max {
		return 0, 0, unix.Fstat(dirfd, st)
	}
	w, err := unix.InotifyAddWatch(x.fd, "/proc/self/fd/"+strconv.Itoa(dirfd), watchMask)
	switch {
	case err == unix.ENOSPC:
		x.max = len(x.watches)
	case err != nil:
		// (No /proc: no watch will ever be set.)
		x.broken = true
	}
	if err := unix.Fstat(dirfd, st); err != nil || w <= 0 {
		return 0, 0, err
	}
	wd = int32(w)
	d := x.watches[wd]
	switch {
	case d == nil:
		d = &dirWatch{dev: st.Dev, ino: st.Ino}
		x.watches[wd] = d
	case d.dev == 0 && d.ino == 0:
		d.dev, d.ino = st.Dev, st.Ino // its events were read before this
	case d.dev != st.Dev || d.ino != st.Ino:
		// A number the kernel gave again: what was read for it is the
		// old directory's.
		d = &dirWatch{dev: st.Dev, ino: st.Ino, last: x.seq}
		x.watches[wd] = d
	}
	if d.root != "" && d.root != root {
		d.shared = true
	}
	// (Moved, it is found again where it is now.)
	d.root, d.moved = root, false
	return wd, x.seq, nil
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
			if d == nil {
				d = &dirWatch{}
				x.watches[wd] = d
			}
			d.last = x.seq
			if d.root == "" || d.shared || d.moved {
				x.anyLast = x.seq
			} else {
				x.rootLast[d.root] = x.seq
			}
			if mask&unix.IN_MOVE_SELF != 0 {
				d.moved = true
			}
			if mask&unix.IN_IGNORED != 0 {
				delete(x.watches, wd)
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
	return !x.broken && r.wd != 0 && d != nil && d.dev == r.dev && d.ino == r.ino
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
	return d != nil && d.dev == r.dev && d.ino == r.ino && d.last <= r.seq
}
