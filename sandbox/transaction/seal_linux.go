package transaction

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/internal/printable"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// The transaction's document (transaction.json) holds its manifest and the
// seal of its upper layer — the stamp of every entry as the transaction's
// last command left it — under an HMAC keyed by a secret of the user's that
// no confined command can read (KeyFile). Commit, Diff and the next command
// refuse a directory whose document does not verify, or whose upper layer
// differs from the seal: nothing but the transaction's own commands,
// through the overlay, may change what a commit writes.

// maxDocumentBytes bounds the document read (a stamp is ~200 bytes: a
// quarter of a million entries).
const maxDocumentBytes = 64 << 20

// keyBytes is the size of the HMAC key.
const keyBytes = 32

// keyName is the key file's name in StateDir.
const keyName = "transaction.key"

// KeyFile returns the path of the key that seals transactions:
// $XDG_STATE_HOME/dsh-sandbox/transaction.key when XDG_STATE_HOME is an
// absolute path, else $HOME/.local/state/dsh-sandbox/transaction.key
// (modes.HomeStateDir, which every confined command has hidden, as it has
// the former).
func KeyFile() (string, error) {
	if s := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(s) {
		return filepath.Join(s, filepath.Base(modes.HomeStateDir), keyName), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("transaction key: %w", err)
	}
	return filepath.Join(home, modes.HomeStateDir, keyName), nil
}

// loadKey reads the key, making it first when create is set and there is
// none. The key must be a regular file of the effective user's, readable
// by nobody else.
func loadKey(create bool) ([]byte, error) {
	path, err := KeyFile()
	if err != nil {
		return nil, err
	}
	if create {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("transaction key: %w", err)
		}
		if err := makeKey(path); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("transaction key %s: %w", path, err)
		}
	}
	fd, err := openNoSymlinks(path, unix.O_RDONLY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: the transaction key %s is missing (transactions are sealed with it when made)", ErrTampered, path)
		}
		return nil, fmt.Errorf("transaction key: %w", err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := fstat(fd)
	if err != nil {
		return nil, fmt.Errorf("transaction key %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
		return nil, fmt.Errorf("transaction key %s must be a regular file of yours that nobody else can read (mode 0600)", path)
	}
	key, err := io.ReadAll(io.LimitReader(f, keyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("transaction key %s: %w", path, err)
	}
	if len(key) != keyBytes {
		return nil, fmt.Errorf("transaction key %s has %d bytes, not %d", path, len(key), keyBytes)
	}
	return key, nil
}

func makeKey(path string) error {
	key := make([]byte, keyBytes)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	// A temporary name, then a link to the final one: a key is never seen
	// half-written, and a concurrent maker's key is never replaced.
	tmp := fmt.Sprintf("%s.tmp-%x", path, key[:4])
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(key)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp, path)
	}
	os.Remove(tmp)
	return err
}

// stamp is what the seal keeps of one entry of the upper layer: anything a
// change to the entry changes. A file's change always moves its ctime,
// which no unprivileged process can set back. A directory's ctime also
// moves when this package lends its owner the bits to list it, so a
// directory is kept by everything else instead: its entries are listed, its
// mtime moves with them, and its xattrs (overlay's opaque mark among them)
// are kept as a digest.
type stamp struct {
	// Path is relative to the upper layer ("." for the layer itself), as
	// bytes: a name need not be UTF-8.
	Path  []byte `json:"path"`
	Mode  uint32 `json:"mode"`
	UID   uint32 `json:"uid"`
	GID   uint32 `json:"gid"`
	Size  int64  `json:"size"`
	Ino   uint64 `json:"ino"`
	Nlink uint64 `json:"nlink"`
	Rdev  uint64 `json:"rdev"`
	Mtime int64  `json:"mtime_ns"`
	Ctime int64  `json:"ctime_ns,omitempty"`
	// Xattrs is a digest of a directory's extended attributes.
	Xattrs string `json:"xattrs,omitempty"`
}

func stampOf(rel string, st *unix.Stat_t) stamp {
	s := stamp{Path: []byte(rel), Mode: st.Mode, UID: st.Uid, GID: st.Gid, Size: st.Size, Ino: st.Ino,
		Nlink: uint64(st.Nlink), Rdev: st.Rdev, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
	if isDir(st) {
		s.Ctime = 0
	}
	return s
}

// sameAs compares two stamps; loose (a resumed commit, which may have
// been stopped while it lent a directory its owner's bits) compares a
// directory by identity, type and owner only.
func (s stamp) sameAs(o stamp, loose bool) bool {
	if loose && s.Mode&unix.S_IFMT == unix.S_IFDIR {
		return s.Mode&unix.S_IFMT == o.Mode&unix.S_IFMT && s.Ino == o.Ino && s.UID == o.UID && s.GID == o.GID
	}
	return bytes.Equal(s.Path, o.Path) && s.Mode == o.Mode && s.UID == o.UID && s.GID == o.GID && s.Size == o.Size &&
		s.Ino == o.Ino && s.Nlink == o.Nlink && s.Rdev == o.Rdev && s.Mtime == o.Mtime && s.Ctime == o.Ctime && s.Xattrs == o.Xattrs
}

// xattrDigest digests the extended attributes of the open file fd.
func xattrDigest(fd int) string {
	names := flistxattr(fd)
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	h := sha256.New()
	for _, name := range names {
		v, err := fgetxattr(fd, name)
		if err != nil {
			v = []byte("\x00unreadable: " + err.Error())
		}
		fmt.Fprintf(h, "%d:%s=%d:", len(name), name, len(v))
		h.Write(v)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// document is transaction.json.
type document struct {
	Version        int    `json:"version"`
	Dir            string `json:"dir"`
	Workspace      string `json:"workspace"`
	WorkspaceDev   uint64 `json:"workspace_dev"`
	WorkspaceIno   uint64 `json:"workspace_ino"`
	Started        string `json:"started"`
	StartedCtimeNs int64  `json:"started_ctime_ns"`
	State          string `json:"state"`
	// Running says a command of the transaction was started and the seal
	// does not cover its writes yet: it is cleared when the last one ends
	// under its supervisor. Set when verification fails, it means a
	// command ended without one (its harness killed), not tampering.
	Running bool `json:"running,omitempty"`
	// Upper is the seal: the upper layer's entries, sorted by path.
	Upper []stamp `json:"upper"`
	// MAC is the HMAC-SHA256, hex, of the document with MAC empty.
	MAC string `json:"mac"`
}

func (d document) mac(key []byte) (string, error) {
	d.MAC = ""
	body, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte("dsh-sandbox transaction v2\n"))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readDocument reads and verifies transaction.json in the directory dirfd
// (whose canonical path is dir).
func readDocument(dirfd int, dir string, key []byte) (document, error) {
	var d document
	where := filepath.Join(dir, manifestName)
	fd, err := openAt(dirfd, manifestName, unix.O_RDONLY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return d, fmt.Errorf("not a transaction directory: no %s in %s", manifestName, dir)
		}
		return d, fmt.Errorf("read transaction manifest %s: %w", where, err)
	}
	f := os.NewFile(uintptr(fd), where)
	defer f.Close()
	if st, err := fstat(fd); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return d, fmt.Errorf("%w: %s is not a regular file", ErrTampered, where)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDocumentBytes+1))
	if err != nil {
		return d, fmt.Errorf("read transaction manifest %s: %w", where, err)
	}
	if len(data) > maxDocumentBytes {
		return d, fmt.Errorf("%w: %s is larger than %d bytes", ErrTampered, where, maxDocumentBytes)
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return d, fmt.Errorf("%w: read transaction manifest %s: %v", ErrTampered, where, err)
	}
	if d.Version != manifestVersion {
		if d.Version == 1 {
			return d, fmt.Errorf("transaction %s was made by an older dsh-sandbox, without a seal: discard it and run its commands again", dir)
		}
		return d, fmt.Errorf("transaction manifest %s has version %d; this program reads version %d", where, d.Version, manifestVersion)
	}
	want, err := d.mac(key)
	if err != nil {
		return d, fmt.Errorf("read transaction manifest %s: %w", where, err)
	}
	if !hmac.Equal([]byte(want), []byte(d.MAC)) {
		keyPath, _ := KeyFile()
		return d, fmt.Errorf("%w: the seal of %s does not verify (changed since it was written, or sealed with another key than %s)", ErrTampered, where, keyPath)
	}
	switch d.State {
	case StateOpen, StateCommitting, StateCommitted, StateDiscarded:
	default:
		return d, fmt.Errorf("transaction manifest %s has an unknown state %q", where, d.State)
	}
	if d.Dir != dir {
		return d, fmt.Errorf("%w: %s is the document of the transaction in %s, not of %s", ErrTampered, where, d.Dir, dir)
	}
	if !filepath.IsAbs(d.Workspace) {
		return d, fmt.Errorf("transaction manifest %s names a workspace that is not absolute: %q", where, d.Workspace)
	}
	return d, nil
}

// writeDocument writes d, sealed with key, to transaction.json in dirfd
// atomically (a temporary file, fsync, rename, fsync of the directory).
func writeDocument(dirfd int, d document, key []byte) error {
	mac, err := d.mac(key)
	if err != nil {
		return err
	}
	d.MAC = mac
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	var random [8]byte
	if _, err := rand.Read(random[:]); err != nil {
		return err
	}
	tmp := "." + manifestName + ".tmp-" + hex.EncodeToString(random[:])
	fd, err := unix.Openat(dirfd, tmp, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirfd, tmp, dirfd, manifestName)
	}
	if err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return err
	}
	return unix.Fsync(dirfd)
}

// sealUpper returns the stamps of the upper layer upperfd, sorted by path.
func sealUpper(upperfd int) ([]stamp, error) {
	st, err := fstat(upperfd)
	if err != nil {
		return nil, err
	}
	root := stampOf(".", st)
	root.Xattrs = xattrDigest(upperfd)
	list := []stamp{root}
	if err := sealDir(upperfd, "", &list); err != nil {
		return nil, err
	}
	sort.Slice(list, func(i, j int) bool { return bytes.Compare(list[i].Path, list[j].Path) < 0 })
	return list, nil
}

func sealDir(dirfd int, rel string, list *[]stamp) error {
	names, err := listDir(dirfd)
	if err != nil {
		return fmt.Errorf("seal %s: %w", relOrDot(rel), err)
	}
	for _, name := range names {
		childRel := joinRel(rel, name)
		st, err := statAt(dirfd, name)
		if err != nil {
			return fmt.Errorf("seal %s: %w", childRel, err)
		}
		s := stampOf(childRel, st)
		if isDir(st) {
			_, err := withDirAccess(dirfd, name, func(fd int) error {
				s.Xattrs = xattrDigest(fd)
				return sealDir(fd, childRel, list)
			})
			if err != nil {
				return fmt.Errorf("seal %s: %w", childRel, err)
			}
		}
		*list = append(*list, s)
	}
	return nil
}

// verifyUpper compares the upper layer with the seal: the same entries,
// each unchanged. A resumed commit (resuming) compares directories by
// identity only: it may have lent them their owner's bits.
func verifyUpper(upperfd int, sealed []stamp, resuming bool) error {
	live, err := sealUpper(upperfd)
	if err != nil {
		return fmt.Errorf("verify the upper layer: %w", err)
	}
	if err := linksInside(live); err != nil {
		return err
	}
	want := make(map[string]stamp, len(sealed))
	for _, s := range sealed {
		want[string(s.Path)] = s
	}
	var diffs []string
	note := func(path, what string) {
		if len(diffs) < 5 {
			diffs = append(diffs, fmt.Sprintf("%s %s", printable.Name(path), what))
		} else if len(diffs) == 5 {
			diffs = append(diffs, "...")
		}
	}
	for _, s := range live {
		w, ok := want[string(s.Path)]
		switch {
		case !ok:
			note(string(s.Path), "added")
		case !s.sameAs(w, resuming):
			note(string(s.Path), "changed")
		}
		delete(want, string(s.Path))
	}
	for p := range want {
		note(p, "removed")
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: its upper layer is not what its last command left (%s)", ErrTampered, strings.Join(diffs, ", "))
	}
	return nil
}

// linksInside refuses an upper layer with a file that has a hard link
// outside it: a write to that file through the overlay would change the
// other link's file too. The overlay never makes such links (it breaks hard
// links at copy-up), but anyone who could write in the transaction's
// directory could. Whiteouts are left out: overlayfs links them to one
// inode of its work directory, and they hold nothing.
func linksInside(list []stamp) error {
	seen := map[uint64]uint64{}
	for _, s := range list {
		if s.Nlink > 1 && s.Mode&unix.S_IFMT != unix.S_IFDIR && !(s.Mode&unix.S_IFMT == unix.S_IFCHR && s.Rdev == 0) {
			seen[s.Ino]++
		}
	}
	for _, s := range list {
		if n, ok := seen[s.Ino]; ok && n < s.Nlink {
			return fmt.Errorf("%w: %s in its upper layer has a hard link outside it", ErrTampered, printable.Name(string(s.Path)))
		}
	}
	return nil
}

func joinRel(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

func relOrDot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}
