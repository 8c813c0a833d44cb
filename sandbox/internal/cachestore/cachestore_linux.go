package cachestore

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Limit is the store's size bound: above it, Open empties every entry no
// command holds.
const Limit = 8 << 30

// measureEvery is how often Open measures the store.
const measureEvery = time.Hour

// Layer is one cache's overlay: Dir, the user's cache (the lower layer and
// where the overlay is mounted), and Upper and Work in the store. Work is
// made for this mount alone ("" when Empty: nothing is mounted over Dir).
type Layer struct {
	Dir, Upper, Work string
	// Volatile: mount it with overlayfs's "volatile" option (Linux 5.10),
	// which Open readied the entry for (see readyVolatile).
	Volatile bool
	// Empty: Dir held nothing when Open looked (a cache of a tool the user
	// has not run outside the sandbox), so Upper alone is what the command
	// sees there: it can be bound instead of an overlay's mount.
	Empty bool
}

// Store holds the locks of the entries a command mounts.
type Store struct {
	locks []*os.File
	swept chan struct{} // closed once sweepWork is done (nil: nothing to sweep)
}

// Close releases the entries, once what earlier mounts left in them is
// gone (see sweepWork).
func (s *Store) Close() error {
	if s == nil {
		return nil
	}
	if s.swept != nil {
		<-s.swept
		s.swept = nil
	}
	for _, l := range s.locks {
		l.Close()
	}
	s.locks = nil
	return nil
}

// entry is the directory of cache dir in store: its path, flattened, and a
// hash of it (two paths never share one).
func entry(store, dir string) string {
	sum := sha256.Sum256([]byte(dir))
	name := strings.ReplaceAll(strings.TrimPrefix(dir, "/"), "/", "_")
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	return filepath.Join(store, name+"-"+hex.EncodeToString(sum[:6]))
}

// Open prepares p's caches for one command (see the package doc): the
// layers to mount, and the Store to close once the command is gone. A
// policy without caches gives none, and so does a store on an overlay.
func Open(p modes.Policy) (*Store, []Layer, error) {
	if len(p.Caches) == 0 {
		return nil, nil, nil
	}
	if err := os.MkdirAll(p.CacheDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("cache store: %w", err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(p.CacheDir, &sfs); err == nil && sfs.Type == unix.OVERLAYFS_SUPER_MAGIC {
		// An overlay takes no upper layer on an overlay (a container's
		// root filesystem, say): the caches stay read-only, and no
		// mount is tried (the kernel would log each refusal).
		return nil, nil, nil
	}
	if due(p.CacheDir) {
		if n, err := Usage(p.CacheDir); err == nil && n > Limit {
			_, _ = Clean(p.CacheDir)
		}
	}
	boot := volatileBoot()
	s := &Store{}
	var layers []Layer
	var sweeps []workSweep
	for _, dir := range p.Caches {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			continue // it stays as it is
		}
		e := entry(p.CacheDir, dir)
		l := Layer{Dir: dir, Upper: filepath.Join(e, "upper")}
		if err := os.MkdirAll(l.Upper, 0o700); err != nil {
			s.Close()
			return nil, nil, fmt.Errorf("cache store: %w", err)
		}
		if err := os.MkdirAll(filepath.Join(e, "work"), 0o700); err != nil {
			s.Close()
			return nil, nil, fmt.Errorf("cache store: %w", err)
		}
		lock, err := lockEntry(e, true)
		if errors.Is(err, unix.EWOULDBLOCK) {
			continue // another command's overlay is live on it
		}
		if err != nil {
			s.Close()
			return nil, nil, fmt.Errorf("cache store: %w", err)
		}
		if boot != "" {
			// Locked: no overlay is live on the entry. Not readied, it
			// is mounted as before: synced when it goes.
			l.Volatile = readyVolatile(e, boot) == nil
		}
		s.locks = append(s.locks, lock)
		l.Empty = isEmpty(dir)
		w := ""
		if !l.Empty {
			if w, err = freshWork(e); err != nil {
				lock.Close()
				s.locks = s.locks[:len(s.locks)-1]
				continue // no overlay: it stays read-only
			}
			l.Work = filepath.Join(e, "work", w)
			// Only an overlay sweeps: its own work directory holds the
			// marker of a volatile mount from its mount on. A bound
			// entry keeps the earlier ones, whose marker says the
			// upper layer may hold unsynced writes: a restart before
			// the next overlay still empties it (readyVolatile).
			sweeps = append(sweeps, workSweep{entry: e, keep: w})
		}
		layers = append(layers, l)
	}
	if len(sweeps) > 0 {
		s.swept = make(chan struct{})
		go func() {
			defer close(s.swept)
			for _, w := range sweeps {
				sweepWork(w.entry, w.keep)
			}
		}()
	}
	return s, layers, nil
}

// Volatile overlays. Without "volatile", the kernel syncs an overlay's
// upper filesystem — all of it: the user's home, usually the root
// filesystem — when the overlay goes, so every workspace-write command
// ended by writing back every dirty page of that filesystem, whoever made
// it (measured: `true` took 65 ms with 300 MB dirty elsewhere on it
// without caches, 290-425 ms with them). A volatile overlay skips every
// sync of its upper layer, and leaves a marker (WORKDIR/work/incompat/
// volatile) on which the kernel refuses another mount on that work
// directory: after a crash, what it skipped may be lost, and the upper
// layer torn. Each mount gets a work directory of its own (freshWork), so
// no marker is ever in the way, and the earlier ones are removed beside
// the command (sweepWork). readyVolatile empties an entry that was mounted
// in another boot (or an unknown one) before its next mount, so a cache
// never shows a torn file: what commands added to it is fetched or built
// again.

// bootFile is an entry's record of the boot it was last mounted in.
const bootFile = ".boot"

// volatileBoot returns this boot's id, or "" where an overlay cannot be
// volatile (before Linux 5.10) or the id cannot be read.
func volatileBoot() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil || !atLeast(unix.ByteSliceToString(u.Release[:]), 5, 10) {
		return ""
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	id := strings.TrimSpace(string(b))
	if len(id) != 36 {
		return ""
	}
	return id
}

// atLeast reports whether kernel release rel ("6.1.0-57-amd64") is at
// least major.minor.
func atLeast(rel string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(rel, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// readyVolatile readies locked entry e for a volatile mount in boot: an
// entry mounted since it was last readied (its work directory holds what
// a mount left) in another boot, or an unknown one, is emptied; then boot
// is recorded, unless it is already. Through descriptors, never through a
// symlink.
func readyVolatile(e, boot string) error {
	dfd, err := unix.Open(e, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if recordedBoot(dfd) == boot {
		return nil // recorded already: no write on a command's path
	}
	wfd, err := openDirAt(dfd, "work")
	if err != nil {
		return err
	}
	mounted := !isEmptyFD(wfd)
	unix.Close(wfd)
	if mounted {
		if err := errors.Join(removeContents(e, "upper"), removeContents(e, "work")); err != nil {
			return err
		}
	}
	fd, err := unix.Openat(dfd, bootFile, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	_, werr := unix.Write(fd, []byte(boot+"\n"))
	return errors.Join(werr, unix.Close(fd))
}

// freshWork makes, in locked entry e's work directory, an empty work
// directory for one overlay mount, and returns its name. A work directory
// an earlier volatile mount used holds the kernel's marker, on which it
// refuses the mount; clearing it took several journaled writes on the
// command's path (about 0.3 ms an entry on this project's ext4), a fresh
// directory takes one.
func freshWork(e string) (string, error) {
	dfd, err := unix.Open(filepath.Join(e, "work"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(dfd)
	for {
		var b [8]byte
		rand.Read(b[:])
		name := workPrefix + hex.EncodeToString(b[:])
		err := unix.Mkdirat(dfd, name, 0o700)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		return name, err
	}
}

// workPrefix begins the name of each mount's work directory.
const workPrefix = "w-"

// workSweep is an entry whose earlier work directories sweepWork removes:
// all but keep, this command's.
type workSweep struct{ entry, keep string }

// sweepWork removes from locked entry e's work directory everything but
// keep: what earlier mounts left (their work directories, markers and all;
// before work directories of their own, the whole directory was one: its
// "work" and "index"). No overlay is live on them (the entry is locked), so
// it runs beside the command, through descriptors, never through a
// symlink; what it cannot remove is left to the next command's.
func sweepWork(e, keep string) {
	dfd, err := unix.Open(filepath.Join(e, "work"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(dfd), "work")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return
	}
	for _, n := range names {
		if n != keep {
			_ = removeAt(dfd, n)
		}
	}
}

// recordedBoot returns the boot entry dfd records ("" if none).
func recordedBoot(dfd int) string {
	fd, err := unix.Openat(dfd, bootFile, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	var b [64]byte
	n, _ := unix.Read(fd, b[:])
	if n <= 0 {
		return ""
	}
	return strings.TrimSpace(string(b[:n]))
}

// openDirAt opens directory path p (relative, of plain names) beneath dfd,
// a component at a time, following no symlink. A directory the kernel
// made without rights for its owner (an overlay's work/work is mode 0)
// gets them first: the entry is locked, so nothing swaps it meanwhile.
func openDirAt(dfd int, p string) (int, error) {
	cur := dfd
	for _, name := range strings.Split(p, "/") {
		var st unix.Stat_t
		err := unix.Fstatat(cur, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		// Taken as it is where this user may (root always): a change of
		// mode is a write to the entry's filesystem.
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Mode&0o700 != 0o700 &&
			unix.Faccessat(cur, name, unix.R_OK|unix.W_OK|unix.X_OK, 0) != nil {
			err = unix.Fchmodat(cur, name, 0o700, 0)
		}
		var fd int
		if err == nil {
			fd, err = unix.Openat(cur, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		if cur != dfd {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = fd
	}
	return cur, nil
}

// lockEntry takes entry e's lock, without waiting; create makes the lock
// file when missing (Open's entries), else a directory without one is not
// an entry (ErrNotExist).
func lockEntry(e string, create bool) (*os.File, error) {
	flags := os.O_RDWR | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(filepath.Join(e, ".lock"), flags, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// due reports whether the store was last measured over measureEvery ago,
// and marks it measured now.
func due(store string) bool {
	stamp := filepath.Join(store, ".measured")
	st, err := os.Lstat(stamp)
	if err == nil && time.Since(st.ModTime()) < measureEvery {
		return false
	}
	if f, err := os.OpenFile(stamp, os.O_WRONLY|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600); err == nil {
		f.Close()
	}
	now := time.Now()
	_ = os.Chtimes(stamp, now, now)
	return true
}

// Usage returns the disk space the store's entries take, in bytes.
func Usage(store string) (int64, error) {
	var n int64
	err := filepath.WalkDir(store, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == store {
				return err
			}
			return nil // a directory a command made unreadable: not counted
		}
		var st unix.Stat_t
		if unix.Lstat(path, &st) == nil {
			n += st.Blocks * 512
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return n, err
}

// Clean empties every entry of store that no command holds, and returns
// how many it left because a command holds them. Only Open's entries are
// touched (their names, their lock files): anything else in store stays.
func Clean(store string) (busy int, err error) {
	ents, err := os.ReadDir(store)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	for _, d := range ents {
		if !d.IsDir() || d.Type()&fs.ModeSymlink != 0 || !isEntryName(d.Name()) {
			continue // not an entry of Open's: a store given by mistake stays as it is
		}
		e := filepath.Join(store, d.Name())
		lock, lerr := lockEntry(e, false)
		if errors.Is(lerr, unix.EWOULDBLOCK) {
			busy++
			continue
		}
		if errors.Is(lerr, fs.ErrNotExist) {
			continue
		}
		if lerr != nil {
			err = errors.Join(err, lerr)
			continue
		}
		// Locked: no command's overlay is live on it, so nothing writes
		// in it while it goes.
		err = errors.Join(err, removeContents(e, "upper"), removeContents(e, "work"))
		lock.Close()
	}
	return busy, err
}

// isEntryName says whether name is one entry would make: a flattened path,
// "-" and 12 hexadecimal digits.
func isEntryName(name string) bool {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || len(name)-i-1 != 12 {
		return false
	}
	_, err := hex.DecodeString(name[i+1:])
	return err == nil
}

// removeContents removes the entry's directory name and everything in it,
// then makes it again, empty.
func removeContents(e, name string) error {
	dfd, err := unix.Open(e, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", e, err)
	}
	defer unix.Close(dfd)
	if err := removeAt(dfd, name); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(e, name), err)
	}
	return unix.Mkdirat(dfd, name, 0o700)
}

// removeAt removes name in directory dfd and everything beneath it,
// through descriptors and never through a symlink. A directory the
// command left without rights for its owner (an overlay's work/work is
// made mode 0) gets them first.
func removeAt(dfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return ignoreMissing(unix.Unlinkat(dfd, name, 0))
	}
	// Listed and emptied as it is where this user may (root always): a
	// change of mode is a write to the entry's filesystem.
	if st.Mode&0o700 != 0o700 && unix.Faccessat(dfd, name, unix.R_OK|unix.W_OK|unix.X_OK, 0) != nil {
		// Fstatat said a directory, and no command runs in the entry
		// (its lock is held): nothing can swap it for a link.
		if err := unix.Fchmodat(dfd, name, 0o700, 0); err != nil {
			return err
		}
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return err
	}
	for _, n := range names {
		if err := removeAt(fd, n); err != nil {
			f.Close()
			return err
		}
	}
	f.Close()
	return ignoreMissing(unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR))
}

func ignoreMissing(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// isEmpty reports whether directory dir has no entry (false when it cannot
// be read).
func isEmpty(dir string) bool {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return isEmptyFD(fd)
}

// isEmptyFD is isEmpty of an open directory, read from its start.
func isEmptyFD(fd int) bool {
	// A small buffer: the kernel stops after a few entries, however many
	// the cache holds.
	var buf [512]byte
	for {
		n, err := unix.Getdents(fd, buf[:])
		if err != nil {
			return false
		}
		if n == 0 {
			return true
		}
		_, _, names := unix.ParseDirent(buf[:n], -1, nil)
		if len(names) > 0 { // "." and ".." are left out
			return false
		}
	}
}
