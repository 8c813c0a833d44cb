package transaction

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/changes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Overlayfs keeps its metadata in xattrs named <prefix>overlay.<name>:
// "user." when mounted with userxattr (unprivileged mounts), "trusted."
// otherwise.
var overlayXattrPrefixes = [...]string{"user.overlay.", "trusted.overlay."}

// tempPrefix names the files Commit writes into the workspace before
// renaming them into place.
const tempPrefix = ".dsh-tx-tmp-"

// maxClockWait bounds how long Create waits for the file timestamp clock
// to tick (a tick is a few milliseconds).
const maxClockWait = 2 * time.Second

// errInterrupted is what the test hook stopAfterEntries returns.
var errInterrupted = errors.New("commit interrupted (test hook)")

// Create makes a new transaction for workspace in dir. dir must be an
// absolute path that does not exist or is an empty directory; workspace
// an absolute path to an existing directory. Neither may contain the
// other. It seals the transaction with the user's key (KeyFile), making
// the key first when there is none. If Create fails it removes what it
// created.
func Create(dir, workspace string) (tx *Tx, err error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("transaction directory %q is not an absolute path", dir)
	}
	ws, err := canonicalWorkspace(workspace)
	if err != nil {
		return nil, err
	}
	canonDir, err := canonicalPath(filepath.Clean(dir))
	if err != nil {
		return nil, fmt.Errorf("transaction directory %s: %w", dir, err)
	}
	if modes.Within(canonDir, ws) {
		return nil, fmt.Errorf("transaction directory %s is inside the workspace %s: the overlay would see its own upper layer", canonDir, ws)
	}
	if modes.Within(ws, canonDir) {
		return nil, fmt.Errorf("workspace %s is inside the transaction directory %s", ws, canonDir)
	}
	key, err := loadKey(true)
	if err != nil {
		return nil, err
	}

	// What to remove if a later step fails: the topmost directory we made,
	// or, when dir already existed (empty), the entries we put in it.
	var createdTop string
	fi, statErr := os.Lstat(canonDir)
	switch {
	case statErr == nil:
		if !fi.IsDir() {
			return nil, fmt.Errorf("transaction directory %s exists and is not a directory", canonDir)
		}
		entries, err := os.ReadDir(canonDir)
		if err != nil {
			return nil, fmt.Errorf("transaction directory %s: %w", canonDir, err)
		}
		if len(entries) > 0 {
			return nil, fmt.Errorf("transaction directory %s is not empty", canonDir)
		}
	case errors.Is(statErr, fs.ErrNotExist):
		createdTop = topMissingAncestor(canonDir)
		if err := os.MkdirAll(canonDir, 0o700); err != nil {
			return nil, fmt.Errorf("create transaction directory: %w", err)
		}
	default:
		return nil, fmt.Errorf("transaction directory: %w", statErr)
	}
	dirfd, err := openNoSymlinks(canonDir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("transaction directory: %w", err)
	}
	defer unix.Close(dirfd)
	defer func() {
		if err == nil {
			return
		}
		if createdTop != "" {
			_ = os.RemoveAll(createdTop)
			return
		}
		names, _ := listDir(dirfd)
		for _, name := range names {
			_ = removeAllAt(dirfd, name)
		}
	}()
	// Mkdir modes are filtered by the umask; the layout's modes are not
	// a matter of taste (upper becomes the overlay's root directory).
	if err := unix.Fchmod(dirfd, 0o700); err != nil {
		return nil, fmt.Errorf("create transaction directory: %w", err)
	}
	startedNs, err := createStartMarker(dirfd)
	if err != nil {
		return nil, err
	}
	wsfd, err := openNoSymlinks(ws, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	wsSt, err := fstat(wsfd)
	unix.Close(wsfd)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	// The upper layer is the overlay's root directory: the command sees
	// the workspace's own mode there.
	for _, d := range []struct {
		name string
		mode uint32
	}{{upperName, wsSt.Mode & 0o777}, {workName, 0o700}} {
		if err := unix.Mkdirat(dirfd, d.name, 0o700); err != nil {
			return nil, fmt.Errorf("create transaction directory: %w", &fs.PathError{Op: "mkdir", Path: d.name, Err: err})
		}
		if err := unix.Fchmodat(dirfd, d.name, d.mode, 0); err != nil {
			return nil, fmt.Errorf("create transaction directory: %w", err)
		}
	}
	upperfd, err := openDirAt(dirfd, upperName)
	if err != nil {
		return nil, fmt.Errorf("create transaction directory: %w", err)
	}
	defer unix.Close(upperfd)
	if err := probeUserXattrs(upperfd, canonDir); err != nil {
		return nil, err
	}
	tx = &Tx{
		dir:            canonDir,
		workspace:      ws,
		wsDev:          wsSt.Dev,
		wsIno:          wsSt.Ino,
		started:        time.Unix(0, startedNs).UTC(),
		startedCtimeNs: startedNs,
		state:          StateOpen,
	}
	seal, err := sealUpper(upperfd)
	if err != nil {
		return nil, err
	}
	if err := writeDocument(dirfd, tx.document(StateOpen, seal), key); err != nil {
		return nil, fmt.Errorf("write transaction manifest: %w", err)
	}
	return tx, nil
}

// document returns the transaction's document in state with the seal upper.
func (t *Tx) document(state string, upper []stamp) document {
	return document{
		Version:        manifestVersion,
		Dir:            t.dir,
		Workspace:      t.workspace,
		WorkspaceDev:   t.wsDev,
		WorkspaceIno:   t.wsIno,
		Started:        t.started.Format(time.RFC3339Nano),
		StartedCtimeNs: t.startedCtimeNs,
		State:          state,
		Upper:          upper,
	}
}

// createStartMarker creates the marker file in dirfd and returns its
// ctime, after making sure that ctime is strictly later than the clock was
// when Create was called: then a workspace change made before Create has a
// ctime before the transaction's start, and any change made after has one
// at or after it, whatever the clock's granularity.
func createStartMarker(dirfd int) (int64, error) {
	fd, err := unix.Openat(dirfd, markerName, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("create start marker: %w", err)
	}
	defer unix.Close(fd)
	st, err := fstat(fd)
	if err != nil {
		return 0, fmt.Errorf("create start marker: %w", err)
	}
	first := st.Ctim.Nano()
	deadline := time.Now().Add(maxClockWait)
	for {
		// chmod always sets the ctime, even to the same mode.
		if err := unix.Fchmod(fd, 0o600); err != nil {
			return 0, fmt.Errorf("create start marker: %w", err)
		}
		if st, err = fstat(fd); err != nil {
			return 0, fmt.Errorf("create start marker: %w", err)
		}
		if now := st.Ctim.Nano(); now > first {
			return now, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("create start marker in %s: the file timestamp clock did not advance in %v", procPath(dirfd), maxClockWait)
		}
		time.Sleep(time.Millisecond)
	}
}

// Open opens an existing transaction that is open or whose commit was
// interrupted. A committed or discarded one gives an error wrapping
// ErrEnded; one whose document does not verify, an error wrapping
// ErrTampered.
func Open(dir string) (*Tx, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("transaction directory %q is not an absolute path", dir)
	}
	canonDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("not a transaction directory: no %s in %s (the directory does not exist)", manifestName, dir)
		}
		return nil, fmt.Errorf("open transaction %s: %w", dir, err)
	}
	tx := &Tx{dir: canonDir}
	s, err := tx.begin()
	if err != nil {
		return nil, err
	}
	s.close()
	if err := tx.checkUsable(); err != nil {
		return nil, err
	}
	return tx, nil
}

// OpenOrCreate opens the transaction in dir when there is one for the
// same workspace, and creates one when dir does not exist or is empty.
func OpenOrCreate(dir, workspace string) (*Tx, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("transaction directory %q is not an absolute path", dir)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(entries) == 0) {
		return Create(dir, workspace)
	}
	if err != nil {
		return nil, fmt.Errorf("transaction directory %s: %w", dir, err)
	}
	ws, err := canonicalWorkspace(workspace)
	if err != nil {
		return nil, err
	}
	tx, err := Open(dir)
	if err != nil {
		return nil, err
	}
	if tx.workspace != ws {
		return nil, fmt.Errorf("transaction %s is for workspace %s, not %s", tx.dir, tx.workspace, ws)
	}
	return tx, nil
}

// session is the transaction directory opened, without following a
// symlink, with its verified document.
type session struct {
	t   *Tx
	fd  int
	key []byte
	doc document
}

// begin opens the transaction's directory and reads its document, and
// updates t from it.
func (t *Tx) begin() (*session, error) {
	fd, err := openNoSymlinks(t.dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("open transaction %s: %w", t.dir, err)
	}
	s := &session{t: t, fd: fd}
	if st, _ := statAtIfExists(fd, manifestName); st == nil {
		s.close()
		return nil, fmt.Errorf("not a transaction directory: no %s in %s", manifestName, t.dir)
	}
	if s.key, err = loadKey(false); err != nil {
		s.close()
		return nil, err
	}
	if err := s.reload(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *session) close() { unix.Close(s.fd) }

// reload reads the document again (another process may have changed its
// state) and updates the Tx.
func (s *session) reload() error {
	d, err := readDocument(s.fd, s.t.dir, s.key)
	if err != nil {
		return err
	}
	s.doc = d
	t := s.t
	if t.workspace != "" && (d.Workspace != t.workspace || d.StartedCtimeNs != t.startedCtimeNs) {
		return fmt.Errorf("%w: %s names another transaction than the one opened", ErrTampered, filepath.Join(t.dir, manifestName))
	}
	t.workspace, t.wsDev, t.wsIno = d.Workspace, d.WorkspaceDev, d.WorkspaceIno
	t.startedCtimeNs, t.started = d.StartedCtimeNs, time.Unix(0, d.StartedCtimeNs).UTC()
	t.state = d.State
	return nil
}

// save writes the document with state and the seal upper, and whether a
// command runs with writes the seal does not cover.
func (s *session) save(state string, upper []stamp, running bool) error {
	d := s.t.document(state, upper)
	d.Running = running
	if err := writeDocument(s.fd, d, s.key); err != nil {
		return fmt.Errorf("write transaction manifest %s: %w", filepath.Join(s.t.dir, manifestName), err)
	}
	s.doc = d
	s.t.state = state
	return nil
}

// lock takes an exclusive, non-blocking flock on the transaction
// directory for the duration of a Commit or Discard.
func (s *session) lock() error {
	if err := unix.Flock(s.fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("transaction %s is busy: a command runs in it, or another process is committing or discarding it", s.t.dir)
		}
		return fmt.Errorf("lock transaction %s: %w", s.t.dir, err)
	}
	return nil
}

// openUpper opens the upper layer (a directory, never a symlink to one).
func (s *session) openUpper() (int, error) {
	fd, err := openDirAt(s.fd, upperName)
	if err != nil {
		return -1, fmt.Errorf("%w: the upper layer of %s: %v", ErrTampered, s.t.dir, err)
	}
	return fd, nil
}

// openWorkspace opens the workspace, refusing a symlink anywhere on its
// path and a directory other than the one the transaction started on.
func (s *session) openWorkspace() (int, error) {
	fd, err := openNoSymlinks(s.t.workspace, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1, fmt.Errorf("workspace %s: %w (it must be the directory the transaction started on, reached without symlinks)", s.t.workspace, err)
	}
	st, err := fstat(fd)
	if err == nil && (st.Dev != s.t.wsDev || st.Ino != s.t.wsIno) {
		err = fmt.Errorf("workspace %s is not the directory the transaction started on (it was replaced since)", s.t.workspace)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// verifyIdle compares the upper layer with the seal unless a command of
// the transaction runs (its writes are not sealed yet).
func (s *session) verifyIdle(upperfd int) error {
	if err := unix.Flock(s.fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil // a command runs in it, or a commit or discard
	}
	defer unix.Flock(s.fd, unix.LOCK_UN)
	return s.verify(upperfd, false)
}

// Hold marks the transaction in use by a command. It returns the
// directory, opened with a shared flock that Commit and Discard (taking
// it exclusive) refuse to wait for, so that the upper layer is never moved
// into the workspace while a command writes to it: the lock lasts while
// the directory is open in any process, and the sandbox hands it to the
// runner's own processes, which outlive the command's overlay. When no
// other command of the transaction runs, Hold first checks the upper
// layer against the seal (an error wrapping ErrTampered when it differs).
// It fails when the transaction is not open as its document says now, or
// is being committed or discarded.
func (t *Tx) Hold() (*Hold, error) {
	s, err := t.begin()
	if err != nil {
		return nil, err
	}
	ok := false
	var upperfd, workfd = -1, -1
	defer func() {
		if !ok {
			for _, fd := range []int{upperfd, workfd} {
				if fd >= 0 {
					unix.Close(fd)
				}
			}
			s.close()
		}
	}()
	sole := unix.Flock(s.fd, unix.LOCK_EX|unix.LOCK_NB) == nil
	if !sole {
		if err := unix.Flock(s.fd, unix.LOCK_SH|unix.LOCK_NB); err != nil {
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("transaction %s is busy: it is being committed or discarded", t.dir)
			}
			return nil, fmt.Errorf("transaction %s: %w", t.dir, err)
		}
	}
	if err := s.reload(); err != nil {
		return nil, err
	}
	if s.doc.State != StateOpen {
		return nil, fmt.Errorf("transaction %s is %s: a command cannot run in it (commit it again to finish)", t.dir, s.doc.State)
	}
	if upperfd, err = s.openUpper(); err != nil {
		return nil, err
	}
	if sole {
		if err := s.verify(upperfd, false); err != nil {
			return nil, err
		}
		if !s.doc.Running {
			if err := s.save(s.doc.State, s.doc.Upper, true); err != nil {
				return nil, err
			}
		}
		// Now shared, like every other command's (not atomic: a commit
		// may take the lock in between, and then this command waits for
		// nothing and fails).
		if err := unix.Flock(s.fd, unix.LOCK_SH|unix.LOCK_NB); err != nil {
			return nil, fmt.Errorf("transaction %s is busy: it is being committed or discarded", t.dir)
		}
	}
	if workfd, err = openAt(s.fd, workName, unix.O_PATH|unix.O_DIRECTORY); err != nil {
		return nil, fmt.Errorf("%w: the work directory of %s: %v", ErrTampered, t.dir, err)
	}
	files := []*os.File{
		os.NewFile(uintptr(s.fd), t.dir),
		os.NewFile(uintptr(upperfd), filepath.Join(t.dir, upperName)),
		os.NewFile(uintptr(workfd), filepath.Join(t.dir, workName)),
	}
	h := &Hold{files: files}
	h.release = func(seal bool) error {
		var err error
		if seal {
			err = s.seal(upperfd)
		}
		for _, f := range files {
			f.Close()
		}
		return err
	}
	ok = true
	return h, nil
}

// seal records the upper layer upperfd as the transaction's last command
// left it. Sealers take turns (a flock on the upper layer), so the last
// one to end writes the seal that covers every command's writes.
func (s *session) seal(upperfd int) error {
	if err := unix.Flock(upperfd, unix.LOCK_EX); err != nil {
		return fmt.Errorf("seal transaction %s: %w", s.t.dir, err)
	}
	defer unix.Flock(upperfd, unix.LOCK_UN)
	if err := s.reload(); err != nil {
		return fmt.Errorf("seal transaction %s: %w", s.t.dir, err)
	}
	list, err := sealUpper(upperfd)
	if err == nil {
		err = linksInside(list)
	}
	if err != nil {
		return fmt.Errorf("seal transaction %s: %w", s.t.dir, err)
	}
	// The last command to end clears Running: only then does the seal
	// cover every command's writes. (Our own lock is shared; it becomes
	// exclusive only if no other command holds the transaction.)
	last := unix.Flock(s.fd, unix.LOCK_EX|unix.LOCK_NB) == nil
	err = s.save(s.doc.State, list, !last)
	if last {
		unix.Flock(s.fd, unix.LOCK_SH)
	}
	return err
}

// verify compares the upper layer upperfd with the seal (see verifyUpper),
// naming a command that ended without its supervisor as such.
func (s *session) verify(upperfd int, resuming bool) error {
	err := verifyUpper(upperfd, s.doc.Upper, resuming)
	if err != nil && s.doc.Running {
		return fmt.Errorf("transaction %s: %w (a command of it did not end under its supervisor — its harness killed? — so what it wrote was never sealed and cannot be committed: discard the transaction)", s.t.dir, err)
	}
	if err != nil {
		return fmt.Errorf("transaction %s: %w", s.t.dir, err)
	}
	return nil
}

// Changes lists what the upper layer changes in the workspace, sorted by
// path. When no command of the transaction runs, the upper layer must
// match its seal (an error wrapping ErrTampered otherwise).
func (t *Tx) Changes() ([]Change, error) {
	v, err := t.review()
	if err != nil {
		return nil, err
	}
	defer v.close()
	return v.changes()
}

// review opens the upper layer and the workspace for reading what the
// transaction changes, the layer checked against its seal when no command
// of the transaction runs.
func (t *Tx) review() (*view, error) {
	if err := t.checkUsable(); err != nil {
		return nil, err
	}
	s, err := t.begin()
	if err != nil {
		return nil, err
	}
	defer s.close()
	if err := t.checkUsable(); err != nil {
		return nil, err
	}
	v, err := s.openView()
	if err != nil {
		return nil, err
	}
	if err := s.verifyIdle(v.upper); err != nil {
		v.close()
		return nil, err
	}
	return v, nil
}

// view is the upper layer and the workspace, opened side by side.
type view struct {
	t         *Tx
	upper, ws int
}

func (s *session) openView() (*view, error) {
	upper, err := s.openUpper()
	if err != nil {
		return nil, err
	}
	ws, err := s.openWorkspace()
	if err != nil {
		unix.Close(upper)
		return nil, err
	}
	return &view{t: s.t, upper: upper, ws: ws}, nil
}

func (v *view) close() {
	unix.Close(v.upper)
	unix.Close(v.ws)
}

func (v *view) changes() ([]Change, error) {
	var list []Change
	if err := v.collectChanges(v.upper, v.ws, "", &list); err != nil {
		return nil, err
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Path < list[j].Path })
	return list, nil
}

// collectChanges appends the changes under the upper directory upperfd
// (rel in the layer) against the workspace directory wsfd; wsfd is -1
// under a directory that replaces (or adds to) the workspace wholesale:
// nothing in the workspace shows through there.
func (v *view) collectChanges(upperfd, wsfd int, rel string, list *[]Change) error {
	names, err := listDir(upperfd)
	if err != nil {
		return fmt.Errorf("list changes: %w", err)
	}
	for _, name := range names {
		childRel := joinRel(rel, name)
		realPath := filepath.Join(v.t.workspace, childRel)
		st, err := statAt(upperfd, name)
		if err != nil {
			return fmt.Errorf("list changes: %w", err)
		}
		var realSt *unix.Stat_t
		if wsfd >= 0 {
			if realSt, err = statAtIfExists(wsfd, name); err != nil {
				return fmt.Errorf("list changes: %w", err)
			}
		}
		if isWhiteout(st) {
			if realSt != nil {
				*list = append(*list, Change{Op: "removed", Path: realPath})
			}
			continue
		}
		c := Change{Path: realPath, Type: changes.TypeOf(st.Mode), Mode: fmt.Sprintf("%04o", st.Mode&0o7777)}
		if c.Type == "file" {
			c.Size = st.Size
		}
		switch {
		case c.Type == "dir":
			_, err := withDirAccess(upperfd, name, func(sub int) error {
				merge := realSt != nil && isDir(realSt) && !isOpaqueFD(sub)
				if merge {
					if st.Mode&0o7777 != realSt.Mode&0o7777 {
						c.Op = "mode"
						*list = append(*list, c)
					}
				} else {
					c.Op = "created"
					if realSt != nil {
						c.Op = "modified"
					}
					*list = append(*list, c)
				}
				wsSub := -1
				if merge {
					fd, err := openDirAt(wsfd, name)
					if err != nil {
						return err
					}
					defer unix.Close(fd)
					wsSub = fd
				}
				return v.collectChanges(sub, wsSub, childRel, list)
			})
			if err != nil {
				return fmt.Errorf("list changes: %s: %w", childRel, err)
			}
		case realSt == nil:
			c.Op = "created"
			*list = append(*list, c)
		default:
			c.Op = "modified"
			if c.Type == "file" && changes.TypeOf(realSt.Mode) == "file" && st.Mode&0o7777 != realSt.Mode&0o7777 && st.Size == realSt.Size {
				same, err := sameContentAt(upperfd, wsfd, name)
				if err != nil {
					return fmt.Errorf("list changes: %w", err)
				}
				if same {
					c.Op = "mode"
				}
			}
			*list = append(*list, c)
		}
	}
	return nil
}

// Commit applies the upper layer to the workspace. It first checks the
// upper layer against its seal (an error wrapping ErrTampered, nothing
// applied, when anything else than the transaction's commands changed it)
// and every entry against the workspace, and applies nothing if the
// workspace changed, since the transaction started, at a path the
// transaction writes or removes: it then returns a *ConflictError. The
// upper layer is only read until every entry is applied, so a Commit that
// was interrupted can be run again to finish.
func (t *Tx) Commit() (CommitResult, error) {
	var result CommitResult
	if err := t.checkUsable(); err != nil {
		return result, err
	}
	s, err := t.begin()
	if err != nil {
		return result, err
	}
	defer s.close()
	if err := s.lock(); err != nil {
		return result, err
	}
	if err := s.reload(); err != nil {
		return result, err
	}
	if err := t.checkUsable(); err != nil {
		return result, err
	}
	resuming := t.state == StateCommitting
	v, err := s.openView()
	if err != nil {
		return result, err
	}
	defer v.close()
	if err := s.verify(v.upper, resuming); err != nil {
		return result, err
	}
	sealed := make(map[string]stamp, len(s.doc.Upper))
	for _, st := range s.doc.Upper {
		sealed[string(st.Path)] = st
	}
	a := &applier{v: v, sealed: sealed, result: &result, euid: os.Geteuid(), resuming: resuming}
	if resuming {
		// Our own trash from the interrupted run would look like
		// concurrent changes to the conflict check: finish it first.
		if err := a.finishJournal(s.fd); err != nil {
			return result, err
		}
	}
	conflicts := &ConflictError{Reasons: map[string]string{}}
	if err := a.checkConflicts(v.upper, v.ws, "", conflicts); err != nil {
		return result, err
	}
	if len(conflicts.Paths) > 0 {
		sort.Strings(conflicts.Paths)
		return result, conflicts
	}
	if !resuming {
		if err := s.save(StateCommitting, s.doc.Upper, false); err != nil {
			return result, err
		}
	}
	a.dirfd = s.fd
	err = a.applyDir(v.upper, v.ws, "")
	if closeErr := a.closeJournal(); err == nil {
		err = closeErr
	}
	if err != nil {
		return result, fmt.Errorf("commit of transaction %s stopped (run Commit again to finish it): %w", t.dir, err)
	}
	if err := unix.Syncfs(v.ws); err != nil {
		return result, fmt.Errorf("commit of transaction %s: sync %s: %w", t.dir, t.workspace, err)
	}
	for _, name := range []string{upperName, workName, journalName} {
		if err := removeAllAt(s.fd, name); err != nil {
			return result, fmt.Errorf("commit of transaction %s: clean up: %w", t.dir, err)
		}
	}
	if err := s.save(StateCommitted, nil, false); err != nil {
		return result, err
	}
	return result, nil
}

// applier checks and applies the upper layer to the workspace, parents
// before children, from the entries' sealed stamps: a live entry that
// differs from its stamp stops the commit.
type applier struct {
	v        *view
	sealed   map[string]stamp
	result   *CommitResult
	euid     int
	resuming bool
	dirfd    int // the transaction directory (for the journal)
	journal  *os.File
	entries  int
}

// entry is one entry of an upper directory: its name, path relative to
// the layer, workspace path and sealed stamp.
type entry struct {
	name, rel, real string
	st              *unix.Stat_t
}

// readUpper lists the upper directory upperfd (rel in the layer), each
// entry lstat-ed and checked against its seal.
func (a *applier) readUpper(upperfd int, rel string) ([]entry, error) {
	names, err := listDir(upperfd)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]entry, 0, len(names))
	for _, name := range names {
		childRel := joinRel(rel, name)
		st, err := a.checkedStat(upperfd, name, childRel)
		if err != nil {
			return nil, err
		}
		out = append(out, entry{name: name, rel: childRel, real: filepath.Join(a.v.t.workspace, childRel), st: st})
	}
	return out, nil
}

// checkedStat lstats name in upperfd and compares it with its seal.
func (a *applier) checkedStat(upperfd int, name, rel string) (*unix.Stat_t, error) {
	st, err := statAt(upperfd, name)
	if err != nil {
		return nil, err
	}
	if err := a.check(rel, st); err != nil {
		return nil, err
	}
	return st, nil
}

func (a *applier) check(rel string, st *unix.Stat_t) error {
	sealed, ok := a.sealed[rel]
	live := stampOf(rel, st)
	if isDir(st) {
		live.Xattrs = sealed.Xattrs // checked with the listing (verifyUpper)
	}
	if !ok || !live.sameAs(sealed, a.resuming) {
		return fmt.Errorf("%w: %s changed while it was being committed", ErrTampered, filepath.Join(a.v.t.workspace, rel))
	}
	return nil
}

// checkConflicts adds to c the upper entries under upperfd whose
// workspace counterpart (under wsfd, -1 when absent) changed since the
// transaction started. When resuming an interrupted commit the
// directories' ctimes are ignored: applying entries changed them.
func (a *applier) checkConflicts(upperfd, wsfd int, rel string, c *ConflictError) error {
	entries, err := a.readUpper(upperfd, rel)
	if err != nil {
		return fmt.Errorf("check for conflicts: %w", err)
	}
	t := a.v.t
	for _, e := range entries {
		var realSt *unix.Stat_t
		if wsfd >= 0 {
			if realSt, err = statAtIfExists(wsfd, e.name); err != nil {
				return fmt.Errorf("check for conflicts: %w", err)
			}
		}
		if isWhiteout(e.st) {
			if realSt != nil {
				if err := a.checkUntouched(wsfd, e.name, e.real, realSt, c); err != nil {
					return err
				}
			}
			continue
		}
		if !isDir(e.st) {
			if e.st.Mode&unix.S_IFMT == unix.S_IFREG {
				// A metacopy file keeps its data in the lower layer:
				// applying the entry alone would lose it.
				if err := a.refuseRedirect(upperfd, e); err != nil {
					return err
				}
			}
			switch {
			case realSt == nil:
				if err := a.checkRemoved(upperfd, wsfd, e, c); err != nil {
					return err
				}
			case isDir(realSt):
				// The command replaced a directory by a file.
				if err := a.checkUntouched(wsfd, e.name, e.real, realSt, c); err != nil {
					return err
				}
			case ctimeNs(realSt) >= t.startedCtimeNs:
				if a.resuming {
					// An interrupted commit may have applied this entry
					// already.
					if same, err := sameEntry(upperfd, wsfd, e.name, e.st, realSt); err != nil {
						return fmt.Errorf("check for conflicts: %w", err)
					} else if same {
						continue
					}
				}
				c.add(e.real, "changed since the transaction started")
			}
			continue
		}
		_, err := withDirAccess(upperfd, e.name, func(sub int) error {
			// A redirect (a renamed directory) points into the
			// workspace: applying the entry alone would lose data, so
			// refuse rather than guess.
			if hasOverlayXattrFD(sub, "redirect") {
				return fmt.Errorf("cannot commit %s: the upper layer has an overlay redirect entry there (mount the overlay with redirect_dir=off,metacopy=off)", e.real)
			}
			wsSub := -1
			switch {
			case realSt == nil:
				if err := a.checkRemoved(upperfd, wsfd, e, c); err != nil {
					return err
				}
			case isOpaqueFD(sub):
				// (A resumed commit may have filled it already.)
				if !a.resuming {
					if err := a.checkUntouched(wsfd, e.name, e.real, realSt, c); err != nil {
						return err
					}
				}
			case !isDir(realSt):
				c.add(e.real, "no longer a directory")
			default:
				if !a.resuming && ctimeNs(realSt) >= t.startedCtimeNs {
					c.add(e.real, "changed since the transaction started")
				}
				fd, err := openDirAt(wsfd, e.name)
				if err != nil {
					return fmt.Errorf("check for conflicts: %w", err)
				}
				defer unix.Close(fd)
				wsSub = fd
			}
			return a.checkConflicts(sub, wsSub, e.rel, c)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// refuseRedirect refuses a metacopy file (its data is still in the lower
// layer).
func (a *applier) refuseRedirect(upperfd int, e entry) error {
	f, err := openFileForRead(upperfd, e.name)
	if err != nil {
		return fmt.Errorf("check for conflicts: %w", err)
	}
	defer f.Close()
	if hasOverlayXattrFD(int(f.Fd()), "metacopy") {
		return fmt.Errorf("cannot commit %s: the upper layer has an overlay metacopy entry there (mount the overlay with redirect_dir=off,metacopy=off)", e.real)
	}
	return nil
}

// checkRemoved handles an upper entry whose workspace path is absent. An
// origin xattr says the entry was copied up from the workspace, but not
// from which path: with userxattr its value is empty, and a file the
// command renamed keeps it. So it is a conflict only when the workspace
// directory holding the path changed since the start (an unlink changes
// the directory's ctime): otherwise the path did not exist then, and the
// command moved the file there. An interrupted commit changed directories
// itself, so on resume the rule cannot tell and is skipped.
func (a *applier) checkRemoved(upperfd, wsfd int, e entry, c *ConflictError) error {
	if a.resuming || wsfd < 0 {
		// (An absent parent is judged at the parent's own upper entry.)
		return nil
	}
	origin := false
	switch e.st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		f, err := openFileForRead(upperfd, e.name)
		if err != nil {
			return fmt.Errorf("check for conflicts: %w", err)
		}
		origin = hasOverlayXattrFD(int(f.Fd()), "origin")
		f.Close()
	case unix.S_IFDIR:
		if _, err := withDirAccess(upperfd, e.name, func(fd int) error {
			origin = hasOverlayXattrFD(fd, "origin")
			return nil
		}); err != nil {
			return fmt.Errorf("check for conflicts: %w", err)
		}
	}
	if !origin {
		return nil
	}
	parentSt, err := fstat(wsfd)
	if err != nil {
		return fmt.Errorf("check for conflicts: %w", err)
	}
	if ctimeNs(parentSt) >= a.v.t.startedCtimeNs {
		c.add(e.real, "removed since the transaction started")
	}
	return nil
}

// checkUntouched adds a conflict for name in wsfd (path), or for any
// entry under it when it is a directory, whose ctime is at or after the
// transaction's start: the transaction is about to remove it all.
func (a *applier) checkUntouched(wsfd int, name, path string, st *unix.Stat_t, c *ConflictError) error {
	if !isDir(st) || !a.resuming {
		if ctimeNs(st) >= a.v.t.startedCtimeNs {
			c.add(path, "changed since the transaction started")
		}
	}
	if !isDir(st) {
		return nil
	}
	fd, err := openDirAt(wsfd, name)
	if err != nil {
		return fmt.Errorf("check for conflicts: %w", err)
	}
	defer unix.Close(fd)
	names, err := listDir(fd)
	if err != nil {
		return fmt.Errorf("check for conflicts: %s: %w", path, err)
	}
	for _, n := range names {
		est, err := statAt(fd, n)
		if err != nil {
			return fmt.Errorf("check for conflicts: %w", err)
		}
		if err := a.checkUntouched(fd, n, filepath.Join(path, n), est, c); err != nil {
			return err
		}
	}
	return nil
}

func (c *ConflictError) add(path, reason string) {
	if _, dup := c.Reasons[path]; dup {
		return
	}
	c.Paths = append(c.Paths, path)
	c.Reasons[path] = reason
}

// applyDir applies the entries of the upper directory upperfd to the
// workspace directory wsfd.
func (a *applier) applyDir(upperfd, wsfd int, rel string) error {
	entries, err := a.readUpper(upperfd, rel)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	for _, e := range entries {
		a.entries++
		if t := a.v.t; t.stopAfterEntries > 0 && a.entries > t.stopAfterEntries {
			return errInterrupted
		}
		switch e.st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			err = a.applyDirEntry(upperfd, wsfd, e)
		case unix.S_IFREG, unix.S_IFLNK, unix.S_IFIFO:
			err = a.applyLeaf(upperfd, wsfd, e)
		default:
			if isWhiteout(e.st) {
				err = a.applyWhiteout(wsfd, e)
				break
			}
			// Device nodes and sockets are not something a workspace
			// should receive from a sandboxed command.
			a.result.Skipped = append(a.result.Skipped, e.rel)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) applyWhiteout(wsfd int, e entry) error {
	realSt, err := statAtIfExists(wsfd, e.name)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if realSt != nil {
		if err := a.trash(wsfd, e.name, e.rel); err != nil {
			return err
		}
		a.result.Removed++
	}
	return nil
}

func (a *applier) applyDirEntry(upperfd, wsfd int, e entry) error {
	realSt, err := statAtIfExists(wsfd, e.name)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	wantMode := e.st.Mode & 0o7777 &^ unix.S_ISUID
	_, err = withDirAccess(upperfd, e.name, func(sub int) error {
		changed := false
		if isOpaqueFD(sub) && realSt != nil {
			if isDir(realSt) {
				fd, err := openDirAt(wsfd, e.name)
				if err != nil {
					return fmt.Errorf("apply: %w", err)
				}
				names, err := listDir(fd)
				if err == nil {
					for _, name := range names {
						if err = a.trash(fd, name, joinRel(e.rel, name)); err != nil {
							break
						}
						a.result.Removed++
					}
				}
				unix.Close(fd)
				if err != nil {
					return err
				}
			} else {
				if err := a.trash(wsfd, e.name, e.rel); err != nil {
					return err
				}
				a.result.Removed++
				realSt = nil
			}
			changed = true
		}
		if realSt != nil && !isDir(realSt) {
			// checkConflicts refuses this; the workspace changed meanwhile.
			return fmt.Errorf("apply: %s is no longer a directory", e.real)
		}
		if realSt == nil {
			if err := unix.Mkdirat(wsfd, e.name, 0o700); err != nil {
				return fmt.Errorf("apply: %w", &fs.PathError{Op: "mkdir", Path: e.real, Err: err})
			}
			changed = true
		}
		wsSub, err := openDirAt(wsfd, e.name)
		if err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		defer unix.Close(wsSub)
		subSt, err := fstat(wsSub)
		if err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		if realSt == nil {
			a.chownLike(wsSub, e.st)
		}
		// Filling a directory needs write and search permission on it.
		if subSt.Mode&0o300 != 0o300 && a.euid != 0 {
			if err := unix.Fchmod(wsSub, subSt.Mode&0o777|0o700); err != nil {
				return fmt.Errorf("apply: chmod %s: %w", e.real, err)
			}
		}
		if err := a.applyDir(sub, wsSub, e.rel); err != nil {
			return err
		}
		if subSt.Mode&0o7777 != wantMode {
			changed = true
		}
		if err := unix.Fchmod(wsSub, wantMode); err != nil {
			return fmt.Errorf("apply: chmod %s: %w", e.real, err)
		}
		if err := unix.UtimesNano(procPath(wsSub), []unix.Timespec{e.st.Atim, e.st.Mtim}); err != nil {
			return fmt.Errorf("apply: set times of %s: %w", e.real, err)
		}
		if changed {
			a.result.Applied++
		}
		return nil
	})
	return err
}

// applyLeaf writes a file, symlink or FIFO of the upper layer to a
// journaled temporary name in its workspace directory, then renames it
// into place (one atomic step for a reader of the workspace). The upper
// entry is read through one descriptor and checked against its seal
// before and after.
func (a *applier) applyLeaf(upperfd, wsfd int, e entry) error {
	realSt, err := statAtIfExists(wsfd, e.name)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if a.resuming && realSt != nil && !isDir(realSt) {
		if same, err := sameEntry(upperfd, wsfd, e.name, e.st, realSt); err == nil && same {
			return nil // applied before the interruption
		}
	}
	if realSt != nil && isDir(realSt) {
		if err := a.trash(wsfd, e.name, e.rel); err != nil {
			return err
		}
		a.result.Removed++
	}
	// The temporary name is derived from the entry's, so that a commit
	// resumed after a crash finds (and replaces) what it left, without a
	// journal entry, and so an fsync, per file.
	tmp := tempName(e.name)
	if err := unix.Unlinkat(wsfd, tmp, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("apply %s: %w", e.real, err)
	}
	if err := a.writeTemp(upperfd, wsfd, e, tmp); err != nil {
		_ = unix.Unlinkat(wsfd, tmp, 0)
		return fmt.Errorf("apply %s: %w", e.real, err)
	}
	if err := unix.Renameat(wsfd, tmp, wsfd, e.name); err != nil {
		_ = unix.Unlinkat(wsfd, tmp, 0)
		return fmt.Errorf("apply %s: %w", e.real, err)
	}
	a.result.Applied++
	return nil
}

// writeTemp makes tmp in wsfd a copy of the upper entry e.
func (a *applier) writeTemp(upperfd, wsfd int, e entry, tmp string) error {
	st := e.st
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		target, err := readlinkAt(upperfd, e.name)
		if err != nil {
			return err
		}
		if _, err := a.checkedStat(upperfd, e.name, e.rel); err != nil {
			return err
		}
		if err := unix.Symlinkat(target, wsfd, tmp); err != nil {
			return err
		}
		if a.euid == 0 {
			_ = unix.Fchownat(wsfd, tmp, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW)
		}
	case unix.S_IFIFO:
		if err := unix.Mkfifoat(wsfd, tmp, 0o600); err != nil {
			return err
		}
		fd, err := openAt(wsfd, tmp, unix.O_PATH)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if a.euid == 0 {
			_ = unix.Fchownat(fd, "", int(st.Uid), int(st.Gid), unix.AT_EMPTY_PATH)
		}
		if err := unix.Chmod(procPath(fd), st.Mode&0o777); err != nil {
			return err
		}
	default:
		if err := a.copyRegular(upperfd, wsfd, e, tmp); err != nil {
			return err
		}
	}
	return unix.UtimesNanoAt(wsfd, tmp, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
}

// tempName is the temporary name Commit writes the workspace entry name
// under before renaming it into place.
func tempName(name string) string {
	sum := sha256.Sum256([]byte(name))
	return tempPrefix + hex.EncodeToString(sum[:12])
}

// setidBits are the mode bits Commit never gives a regular file.
const setidBits = unix.S_ISUID | unix.S_ISGID

// copyRegular copies content, ownership (when root), mode and the xattrs
// of a regular file (but overlay's and file capabilities), and checks the
// source against its seal once copied: a file changed meanwhile stops the
// commit.
func (a *applier) copyRegular(upperfd, wsfd int, e entry, tmp string) error {
	in, err := openFileForRead(upperfd, e.name)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := a.checkFD(in, e.rel); err != nil {
		return err
	}
	fd, err := unix.Openat(wsfd, tmp, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(fd), tmp)
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	st := e.st
	if a.euid == 0 {
		if err := out.Chown(int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	mode := st.Mode & 0o7777
	if mode&setidBits != 0 {
		mode &^= setidBits
		a.result.Stripped = append(a.result.Stripped, e.rel)
	}
	// After the chown, which clears set-id bits.
	if err := unix.Fchmod(fd, mode); err != nil {
		return err
	}
	stripped := copyXattrs(int(in.Fd()), fd)
	if stripped && mode == st.Mode&0o7777 {
		a.result.Stripped = append(a.result.Stripped, e.rel)
	}
	return a.checkFD(in, e.rel)
}

// checkFD compares the open upper file with its seal.
func (a *applier) checkFD(f *os.File, rel string) error {
	st, err := fstat(int(f.Fd()))
	if err != nil {
		return err
	}
	return a.check(rel, st)
}

// copyXattrs copies the extended attributes but overlay's and the file
// capabilities (security.capability, which would elevate whoever runs
// the file; reported as stripped), as far as the filesystem and our
// privileges allow: the rest are a nicety, not part of what a transaction
// promises.
func copyXattrs(src, dst int) (strippedCaps bool) {
	for _, name := range flistxattr(src) {
		if isOverlayXattr(name) {
			continue
		}
		if name == "security.capability" {
			strippedCaps = true
			continue
		}
		value, err := fgetxattr(src, name)
		if err != nil {
			continue
		}
		_ = unix.Fsetxattr(dst, name, value, 0)
	}
	return strippedCaps
}

// chownLike gives the open file fd the owner of st, when we are root (an
// unprivileged user owns everything it creates anyway). Failures are
// ignored: the content is what the transaction promises.
func (a *applier) chownLike(fd int, st *unix.Stat_t) {
	if a.euid == 0 {
		_ = unix.Fchown(fd, int(st.Uid), int(st.Gid))
	}
}

// trash removes name in wsfd (rel in the workspace) by renaming it to a
// journaled trash name in its directory (one atomic step) and then
// deleting the trash; an interrupted commit finishes the deletion from the
// journal.
func (a *applier) trash(wsfd int, name, rel string) error {
	trashName, err := a.journaledName(rel, trashPrefix)
	if err != nil {
		return err
	}
	if err := unix.Renameat(wsfd, name, wsfd, trashName); err != nil {
		return fmt.Errorf("apply: remove %s: %w", filepath.Join(a.v.t.workspace, rel), err)
	}
	if err := removeAllAt(wsfd, trashName); err != nil {
		return fmt.Errorf("apply: remove %s: %w", filepath.Join(a.v.t.workspace, rel), err)
	}
	return nil
}

// journaledName picks a random name next to rel (a path relative to the
// workspace) and records it, relative to the workspace, in the journal
// (fsynced) before anything is created under it. It returns the name.
func (a *applier) journaledName(rel, prefix string) (string, error) {
	var random [8]byte
	if _, err := rand.Read(random[:]); err != nil {
		return "", fmt.Errorf("apply: %w", err)
	}
	name := prefix + hex.EncodeToString(random[:])
	if a.journal == nil {
		fd, err := unix.Openat(a.dirfd, journalName, unix.O_CREAT|unix.O_APPEND|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return "", fmt.Errorf("apply: open journal: %w", err)
		}
		a.journal = os.NewFile(uintptr(fd), journalName)
	}
	line := strconv.Quote(filepath.Join(filepath.Dir(rel), name)) + "\n"
	if _, err := a.journal.WriteString(line); err != nil {
		return "", fmt.Errorf("apply: write journal: %w", err)
	}
	if err := a.journal.Sync(); err != nil {
		return "", fmt.Errorf("apply: write journal: %w", err)
	}
	return name, nil
}

func (a *applier) closeJournal() error {
	if a.journal == nil {
		return nil
	}
	err := a.journal.Close()
	a.journal = nil
	if err != nil {
		return fmt.Errorf("close journal: %w", err)
	}
	return nil
}

// finishJournal deletes the trash and temporary files an interrupted
// commit recorded, then the journal. It only deletes names this package
// makes, beneath the workspace and without following a symlink, so a
// damaged journal cannot remove anything else.
func (a *applier) finishJournal(dirfd int) error {
	fd, err := openAt(dirfd, journalName, unix.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	f := os.NewFile(uintptr(fd), journalName)
	data, err := io.ReadAll(io.LimitReader(f, maxDocumentBytes))
	f.Close()
	if err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for scanner.Scan() {
		rel, err := strconv.Unquote(scanner.Text())
		if err != nil {
			continue // a line torn by a crash: nothing was created under it
		}
		base := filepath.Base(rel)
		if !strings.HasPrefix(base, trashPrefix) || !filepath.IsLocal(rel) {
			return fmt.Errorf("journal of %s names an unexpected path %q", a.v.t.dir, rel)
		}
		if err := removeBeneath(a.v.ws, rel); err != nil {
			return fmt.Errorf("finish removing %s: %w", rel, err)
		}
	}
	if err := scanner.Err(); err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	if err := unix.Unlinkat(dirfd, journalName, 0); err != nil {
		return fmt.Errorf("remove journal: %w", err)
	}
	return nil
}

// removeBeneath removes rel (and all under it) beneath the directory
// dirfd, following no symlink; a missing parent means nothing to remove.
func removeBeneath(dirfd int, rel string) error {
	dir := filepath.Dir(rel)
	if dir == "." {
		return removeAllAt(dirfd, rel)
	}
	p, err := openBeneath(dirfd, dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(p)
	return removeAllAt(p, filepath.Base(rel))
}

// Discard drops the upper layer. The workspace is not touched.
func (t *Tx) Discard() error {
	if err := t.checkUsable(); err != nil {
		return err
	}
	s, err := t.begin()
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.lock(); err != nil {
		return err
	}
	if err := s.reload(); err != nil {
		return err
	}
	if err := t.checkUsable(); err != nil {
		return err
	}
	if t.state == StateCommitting {
		return fmt.Errorf("transaction %s is partly committed: run Commit again to finish it (discarding now would leave the workspace half-applied)", t.dir)
	}
	for _, name := range []string{upperName, workName} {
		if err := removeAllAt(s.fd, name); err != nil {
			return fmt.Errorf("discard transaction %s: %w", t.dir, err)
		}
	}
	return s.save(StateDiscarded, nil, false)
}

// --- filesystem helpers ---

func lstat(path string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	return &st, nil
}

func ctimeNs(st *unix.Stat_t) int64 { return st.Ctim.Nano() }

func isDir(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

// isWhiteout reports overlayfs's mark of a removed path: a character
// device with device number 0:0.
func isWhiteout(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
}

func isOverlayXattr(name string) bool {
	for _, prefix := range overlayXattrPrefixes {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// probeUserXattrs checks that the filesystem of the directory fd keeps
// user.* xattrs: the overlay marks opaque directories and copied-up files
// with them, and without them removing a directory inside it fails (EIO).
// tmpfs keeps them only from Linux 6.6.
func probeUserXattrs(fd int, dir string) error {
	const probe = "user.dsh-tx.probe"
	err := unix.Fsetxattr(fd, probe, []byte("1"), 0)
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%w: %s is on a filesystem without user extended attributes (tmpfs before Linux 6.6, for one), which the overlay's upper layer needs: put the transaction directory on another filesystem", ErrUnsupported, dir)
	}
	if err != nil {
		return fmt.Errorf("transaction directory %s: user extended attributes: %w", dir, err)
	}
	return unix.Fremovexattr(fd, probe)
}

func readlinkAt(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", &fs.PathError{Op: "readlink", Path: name, Err: err}
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// sameContentAt compares the regular files name in dirA and dirB byte by
// byte.
func sameContentAt(dirA, dirB int, name string) (bool, error) {
	fa, err := openFileForRead(dirA, name)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := openFileForRead(dirB, name)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	return sameReaders(fa, fb)
}

func sameReaders(fa, fb io.Reader) (bool, error) {
	bufA, bufB := make([]byte, 64*1024), make([]byte, 64*1024)
	for {
		na, errA := io.ReadFull(fa, bufA)
		nb, errB := io.ReadFull(fb, bufB)
		if !bytes.Equal(bufA[:na], bufB[:nb]) {
			return false, nil
		}
		doneA := errors.Is(errA, io.EOF) || errors.Is(errA, io.ErrUnexpectedEOF)
		doneB := errors.Is(errB, io.EOF) || errors.Is(errB, io.ErrUnexpectedEOF)
		if errA != nil && !doneA {
			return false, errA
		}
		if errB != nil && !doneB {
			return false, errB
		}
		if doneA || doneB {
			return doneA && doneB, nil
		}
	}
}

// sameEntry reports whether the workspace (wsfd) already holds exactly
// the upper entry name (upperfd, stat st): same type, mode (set-id bits
// aside, which Commit strips) and content (or symlink target).
func sameEntry(upperfd, wsfd int, name string, st, realSt *unix.Stat_t) (bool, error) {
	if st.Mode&unix.S_IFMT != realSt.Mode&unix.S_IFMT || st.Mode&0o7777&^setidBits != realSt.Mode&0o7777&^setidBits {
		return false, nil
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if st.Size != realSt.Size {
			return false, nil
		}
		return sameContentAt(upperfd, wsfd, name)
	case unix.S_IFLNK:
		a, errA := readlinkAt(upperfd, name)
		b, errB := readlinkAt(wsfd, name)
		return errA == nil && errB == nil && a == b, nil
	case unix.S_IFIFO:
		return true, nil
	}
	return false, nil
}

// --- paths ---

func canonicalWorkspace(workspace string) (string, error) {
	if !filepath.IsAbs(workspace) {
		return "", fmt.Errorf("workspace %q is not an absolute path", workspace)
	}
	ws, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	fi, err := os.Stat(ws)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("workspace %s is not a directory", ws)
	}
	return ws, nil
}

// canonicalPath resolves the symlinks of the longest existing prefix of
// an absolute, clean path and appends the rest.
func canonicalPath(path string) (string, error) {
	rest := ""
	for p := path; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			resolved, err := filepath.EvalSymlinks(p)
			if err != nil {
				return "", err
			}
			return filepath.Join(resolved, rest), nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if p == filepath.Dir(p) {
			return path, nil
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// topMissingAncestor is the outermost directory MkdirAll(path) will make.
func topMissingAncestor(path string) string {
	top := path
	for p := filepath.Dir(path); p != filepath.Dir(p); p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		}
		top = p
	}
	return top
}
