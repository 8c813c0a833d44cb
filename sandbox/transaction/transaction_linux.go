package transaction

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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

// tempPrefix names the files Commit copies into the workspace before
// renaming them into place (only when the upper layer is on another
// filesystem).
const tempPrefix = ".dsh-tx-tmp-"

// maxClockWait bounds how long Create waits for the file timestamp clock
// to tick (a tick is a few milliseconds).
const maxClockWait = 2 * time.Second

// errInterrupted is what the test hook stopAfterEntries returns.
var errInterrupted = errors.New("commit interrupted (test hook)")

// Create makes a new transaction for workspace in dir. dir must be an
// absolute path that does not exist or is an empty directory; workspace
// an absolute path to an existing directory. Neither may contain the
// other. If Create fails it removes what it created.
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
	defer func() {
		if err == nil {
			return
		}
		if createdTop != "" {
			_ = forceRemoveAll(createdTop)
			return
		}
		entries, _ := os.ReadDir(canonDir)
		for _, e := range entries {
			_ = forceRemoveAll(filepath.Join(canonDir, e.Name()))
		}
	}()
	// Mkdir modes are filtered by the umask; the layout's modes are not
	// a matter of taste (upper becomes the overlay's root directory).
	if err := os.Chmod(canonDir, 0o700); err != nil {
		return nil, fmt.Errorf("create transaction directory: %w", err)
	}

	startedNs, err := createStartMarker(filepath.Join(canonDir, markerName))
	if err != nil {
		return nil, err
	}
	// The upper layer is the overlay's root directory: the command sees
	// the workspace's own mode there.
	wsInfo, err := os.Stat(ws)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	for _, d := range []struct {
		name string
		mode os.FileMode
	}{{upperName, wsInfo.Mode().Perm()}, {workName, 0o700}} {
		p := filepath.Join(canonDir, d.name)
		if err := os.Mkdir(p, d.mode); err != nil {
			return nil, fmt.Errorf("create transaction directory: %w", err)
		}
		if err := os.Chmod(p, d.mode); err != nil {
			return nil, fmt.Errorf("create transaction directory: %w", err)
		}
	}
	if err := probeUserXattrs(filepath.Join(canonDir, upperName)); err != nil {
		return nil, err
	}
	tx = &Tx{
		dir:            canonDir,
		workspace:      ws,
		started:        time.Unix(0, startedNs).UTC(),
		startedCtimeNs: startedNs,
		state:          StateOpen,
	}
	if err := tx.writeState(StateOpen); err != nil {
		return nil, err
	}
	return tx, nil
}

// createStartMarker creates the marker file and returns its ctime, after
// making sure that ctime is strictly later than the clock was when Create
// was called: then a workspace change made before Create has a ctime
// before the transaction's start, and any change made after has one at or
// after it, whatever the clock's granularity.
func createStartMarker(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, fmt.Errorf("create start marker: %w", err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("create start marker: %w", err)
	}
	st, err := lstat(path)
	if err != nil {
		return 0, fmt.Errorf("create start marker: %w", err)
	}
	first := ctimeNs(st)
	deadline := time.Now().Add(maxClockWait)
	for {
		// chmod always sets the ctime, even to the same mode.
		if err := os.Chmod(path, 0o600); err != nil {
			return 0, fmt.Errorf("create start marker: %w", err)
		}
		if st, err = lstat(path); err != nil {
			return 0, fmt.Errorf("create start marker: %w", err)
		}
		if now := ctimeNs(st); now > first {
			return now, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("create start marker %s: the file timestamp clock did not advance in %v", path, maxClockWait)
		}
		time.Sleep(time.Millisecond)
	}
}

// Open opens an existing transaction that is open or whose commit was
// interrupted. A committed or discarded one gives an error wrapping
// ErrEnded.
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
	m, err := readManifest(canonDir)
	if err != nil {
		return nil, err
	}
	tx := &Tx{
		dir:            canonDir,
		workspace:      m.Workspace,
		startedCtimeNs: m.StartedCtimeNs,
		started:        time.Unix(0, m.StartedCtimeNs).UTC(),
		state:          m.State,
	}
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

// readManifest reads and validates dir/transaction.json.
func readManifest(dir string) (manifest, error) {
	var m manifest
	data, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return m, fmt.Errorf("not a transaction directory: no %s in %s", manifestName, dir)
		}
		return m, fmt.Errorf("read transaction manifest: %w", err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("read transaction manifest %s: %w", filepath.Join(dir, manifestName), err)
	}
	if m.Version != manifestVersion {
		return m, fmt.Errorf("transaction manifest %s has version %d; this program reads version %d", filepath.Join(dir, manifestName), m.Version, manifestVersion)
	}
	switch m.State {
	case StateOpen, StateCommitting, StateCommitted, StateDiscarded:
	default:
		return m, fmt.Errorf("transaction manifest %s has an unknown state %q", filepath.Join(dir, manifestName), m.State)
	}
	if !filepath.IsAbs(m.Workspace) {
		return m, fmt.Errorf("transaction manifest %s names a workspace that is not absolute: %q", filepath.Join(dir, manifestName), m.Workspace)
	}
	return m, nil
}

// writeState rewrites the manifest atomically (temporary file, fsync,
// rename, fsync of the directory) with the given state.
func (t *Tx) writeState(state string) error {
	m := manifest{
		Version:        manifestVersion,
		Workspace:      t.workspace,
		Started:        t.started.Format(time.RFC3339Nano),
		StartedCtimeNs: t.startedCtimeNs,
		State:          state,
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("write transaction manifest: %w", err)
	}
	data = append(data, '\n')
	tmp, err := os.CreateTemp(t.dir, "."+manifestName+".tmp-*")
	if err != nil {
		return fmt.Errorf("write transaction manifest: %w", err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), t.manifestPath())
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write transaction manifest %s: %w", t.manifestPath(), err)
	}
	if err := syncDir(t.dir); err != nil {
		return fmt.Errorf("write transaction manifest %s: %w", t.manifestPath(), err)
	}
	t.state = state
	return nil
}

// refreshState re-reads the manifest, so that a Tx whose transaction was
// ended by another process does not act on it.
func (t *Tx) refreshState() error {
	m, err := readManifest(t.dir)
	if err != nil {
		return err
	}
	t.state = m.State
	return t.checkUsable()
}

// lock takes an exclusive, non-blocking flock on the transaction
// directory for the duration of a Commit or Discard.
func (t *Tx) lock() (unlock func(), err error) {
	fd, err := unix.Open(t.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("lock transaction %s: %w", t.dir, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("transaction %s is busy: a command runs in it, or another process is committing or discarding it", t.dir)
		}
		return nil, fmt.Errorf("lock transaction %s: %w", t.dir, err)
	}
	return func() { _ = unix.Close(fd) }, nil
}

// Changes lists what the upper layer changes in the workspace, sorted by
// path.
func (t *Tx) Changes() ([]Change, error) {
	if err := t.checkUsable(); err != nil {
		return nil, err
	}
	var list []Change
	if err := t.collectChanges("", false, &list); err != nil {
		return nil, err
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Path < list[j].Path })
	return list, nil
}

// upperEntry is one entry of the upper layer: its path relative to the
// layer, its path in the layer and in the workspace, and its lstat.
type upperEntry struct {
	rel, upper, real string
	st               *unix.Stat_t
}

// readUpperDir lists the entries of the upper directory rel, each
// lstat-ed; what prefixes the errors.
func (t *Tx) readUpperDir(rel, what string) ([]upperEntry, error) {
	entries, err := os.ReadDir(filepath.Join(t.UpperDir(), rel))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := make([]upperEntry, 0, len(entries))
	for _, e := range entries {
		childRel := filepath.Join(rel, e.Name())
		upperPath := filepath.Join(t.UpperDir(), childRel)
		st, err := lstat(upperPath)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, upperEntry{rel: childRel, upper: upperPath, real: filepath.Join(t.workspace, childRel), st: st})
	}
	return out, nil
}

// collectChanges appends the changes under the upper directory rel.
// allCreated is set under a directory that replaces (or adds to) the
// workspace wholesale: nothing in the workspace shows through there.
func (t *Tx) collectChanges(rel string, allCreated bool, list *[]Change) error {
	entries, err := t.readUpperDir(rel, "list changes")
	if err != nil {
		return err
	}
	for _, e := range entries {
		childRel, upperPath, realPath, st := e.rel, e.upper, e.real, e.st
		var realSt *unix.Stat_t
		if !allCreated {
			if realSt, err = lstatIfExists(realPath); err != nil {
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
			merge := realSt != nil && isDir(realSt) && !isOpaque(upperPath)
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
			if err := t.collectChanges(childRel, !merge, list); err != nil {
				return err
			}
		case realSt == nil:
			c.Op = "created"
			*list = append(*list, c)
		default:
			c.Op = "modified"
			if c.Type == "file" && changes.TypeOf(realSt.Mode) == "file" && st.Mode&0o7777 != realSt.Mode&0o7777 && st.Size == realSt.Size {
				same, err := sameContent(upperPath, realPath)
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

// Commit applies the upper layer to the workspace. It first checks every
// entry and applies nothing if the workspace changed, since the
// transaction started, at a path the transaction writes or removes: it
// then returns a *ConflictError. Each applied entry leaves the upper
// layer, so a Commit that was interrupted can be run again to finish.
func (t *Tx) Commit() (CommitResult, error) {
	var result CommitResult
	if err := t.checkUsable(); err != nil {
		return result, err
	}
	unlock, err := t.lock()
	if err != nil {
		return result, err
	}
	defer unlock()
	if err := t.refreshState(); err != nil {
		return result, err
	}
	resuming := t.state == StateCommitting
	if resuming {
		// Our own trash from the interrupted run would look like
		// concurrent changes to the conflict check: finish it first.
		if err := t.finishJournal(); err != nil {
			return result, err
		}
	}
	conflicts := &ConflictError{Reasons: map[string]string{}}
	if err := t.checkConflicts("", resuming, conflicts); err != nil {
		return result, err
	}
	if len(conflicts.Paths) > 0 {
		sort.Strings(conflicts.Paths)
		return result, conflicts
	}
	if !resuming {
		if err := t.writeState(StateCommitting); err != nil {
			return result, err
		}
	}

	a := &applier{tx: t, result: &result, euid: os.Geteuid()}
	err = a.applyDir("")
	if closeErr := a.closeJournal(); err == nil {
		err = closeErr
	}
	if err != nil {
		return result, fmt.Errorf("commit of transaction %s stopped (run Commit again to finish it): %w", t.dir, err)
	}
	if err := syncFilesystem(t.workspace); err != nil {
		return result, fmt.Errorf("commit of transaction %s: %w", t.dir, err)
	}
	for _, p := range []string{t.UpperDir(), t.WorkDir(), filepath.Join(t.dir, journalName)} {
		if err := forceRemoveAll(p); err != nil {
			return result, fmt.Errorf("commit of transaction %s: clean up: %w", t.dir, err)
		}
	}
	if err := t.writeState(StateCommitted); err != nil {
		return result, err
	}
	return result, nil
}

// checkConflicts adds to c the upper entries under rel whose workspace
// counterpart changed since the transaction started. When resuming an
// interrupted commit the directories' ctimes are ignored: applying
// entries changed them.
func (t *Tx) checkConflicts(rel string, resuming bool, c *ConflictError) error {
	entries, err := t.readUpperDir(rel, "check for conflicts")
	if err != nil {
		return err
	}
	for _, e := range entries {
		childRel, upperPath, realPath, st := e.rel, e.upper, e.real, e.st
		// A redirect (a renamed directory) or a metacopy (a file whose data
		// is still in the lower layer) points into the workspace: applying
		// the entry alone would lose data, so refuse rather than guess.
		for _, name := range []string{"redirect", "metacopy"} {
			if hasOverlayXattr(upperPath, name) {
				return fmt.Errorf("cannot commit %s: the upper layer has an overlay %s entry there (mount the overlay with redirect_dir=off,metacopy=off)", realPath, name)
			}
		}
		realSt, err := lstatIfExists(realPath)
		if err != nil {
			return fmt.Errorf("check for conflicts: %w", err)
		}
		switch {
		case isWhiteout(st):
			if realSt != nil {
				if err := t.checkUntouched(realPath, realSt, resuming, c); err != nil {
					return err
				}
			}
		case isDir(st):
			switch {
			case realSt == nil:
				if err := t.checkRemoved(upperPath, realPath, resuming, c); err != nil {
					return err
				}
			case isOpaque(upperPath):
				if err := t.checkUntouched(realPath, realSt, resuming, c); err != nil {
					return err
				}
			case !isDir(realSt):
				c.add(realPath, "no longer a directory")
			case !resuming && ctimeNs(realSt) >= t.startedCtimeNs:
				c.add(realPath, "changed since the transaction started")
			}
			if err := t.checkConflicts(childRel, resuming, c); err != nil {
				return err
			}
		default:
			switch {
			case realSt == nil:
				if err := t.checkRemoved(upperPath, realPath, resuming, c); err != nil {
					return err
				}
			case isDir(realSt):
				// The command replaced a directory by a file.
				if err := t.checkUntouched(realPath, realSt, resuming, c); err != nil {
					return err
				}
			case ctimeNs(realSt) >= t.startedCtimeNs:
				if resuming {
					// An interrupted commit may have copied this entry
					// into place without removing it from upper yet.
					if same, err := sameEntry(upperPath, st, realPath, realSt); err != nil {
						return fmt.Errorf("check for conflicts: %w", err)
					} else if same {
						continue
					}
				}
				c.add(realPath, "changed since the transaction started")
			}
		}
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
func (t *Tx) checkRemoved(upperPath, realPath string, resuming bool, c *ConflictError) error {
	if resuming || !hasOverlayXattr(upperPath, "origin") {
		return nil
	}
	parentSt, err := lstatIfExists(filepath.Dir(realPath))
	if err != nil {
		return fmt.Errorf("check for conflicts: %w", err)
	}
	// An absent parent is judged at the parent's own upper entry.
	if parentSt != nil && ctimeNs(parentSt) >= t.startedCtimeNs {
		c.add(realPath, "removed since the transaction started")
	}
	return nil
}

// checkUntouched adds a conflict for path, or for any entry under it when
// it is a directory, whose ctime is at or after the transaction's start:
// the transaction is about to remove it all.
func (t *Tx) checkUntouched(path string, st *unix.Stat_t, resuming bool, c *ConflictError) error {
	if !isDir(st) {
		if ctimeNs(st) >= t.startedCtimeNs {
			c.add(path, "changed since the transaction started")
		}
		return nil
	}
	return filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("check for conflicts: %w", err)
		}
		if d.IsDir() && resuming {
			return nil
		}
		est, err := lstat(p)
		if err != nil {
			return fmt.Errorf("check for conflicts: %w", err)
		}
		if ctimeNs(est) >= t.startedCtimeNs {
			c.add(p, "changed since the transaction started")
		}
		return nil
	})
}

func (c *ConflictError) add(path, reason string) {
	if _, dup := c.Reasons[path]; dup {
		return
	}
	c.Paths = append(c.Paths, path)
	c.Reasons[path] = reason
}

// applier applies the upper layer to the workspace, parents before
// children, removing each applied entry from the upper layer.
type applier struct {
	tx      *Tx
	result  *CommitResult
	euid    int
	journal *os.File
	entries int
}

func (a *applier) applyDir(rel string) error {
	t := a.tx
	entries, err := t.readUpperDir(rel, "apply")
	if err != nil {
		return err
	}
	for _, e := range entries {
		a.entries++
		if t.stopAfterEntries > 0 && a.entries > t.stopAfterEntries {
			return errInterrupted
		}
		childRel, upperPath, realPath, st := e.rel, e.upper, e.real, e.st
		switch {
		case isWhiteout(st):
			err = a.applyWhiteout(upperPath, realPath)
		case isDir(st):
			err = a.applyDirEntry(childRel, upperPath, realPath, st)
		case st.Mode&unix.S_IFMT == unix.S_IFREG, st.Mode&unix.S_IFMT == unix.S_IFLNK, st.Mode&unix.S_IFMT == unix.S_IFIFO:
			err = a.applyLeaf(upperPath, realPath, st)
		default:
			// Device nodes and sockets are not something a workspace
			// should receive from a sandboxed command.
			a.result.Skipped = append(a.result.Skipped, childRel)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) applyWhiteout(upperPath, realPath string) error {
	realSt, err := lstatIfExists(realPath)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if realSt != nil {
		if err := a.trash(realPath); err != nil {
			return err
		}
		a.result.Removed++
	}
	if err := os.Remove(upperPath); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	return nil
}

func (a *applier) applyDirEntry(rel, upperPath, realPath string, st *unix.Stat_t) error {
	realSt, err := lstatIfExists(realPath)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	wantMode, err := a.makeUpperDirWritable(upperPath, st)
	if err != nil {
		return err
	}
	changed := false
	if isOpaque(upperPath) {
		if realSt != nil && isDir(realSt) {
			names, err := readDirNames(realPath)
			if err != nil {
				return fmt.Errorf("apply: %w", err)
			}
			for _, name := range names {
				if err := a.trash(filepath.Join(realPath, name)); err != nil {
					return err
				}
				a.result.Removed++
			}
		} else if realSt != nil {
			if err := a.trash(realPath); err != nil {
				return err
			}
			a.result.Removed++
			realSt = nil
		}
		// From here on the directory is an ordinary merge directory, so
		// an interrupted commit resumes by merging into the (now empty)
		// workspace directory.
		for _, prefix := range overlayXattrPrefixes {
			if err := unix.Lremovexattr(upperPath, prefix+"opaque"); err != nil && !isNoXattr(err) {
				return fmt.Errorf("apply: remove opaque mark of %s: %w", upperPath, err)
			}
		}
		changed = true
	}
	if realSt != nil && !isDir(realSt) {
		// checkConflicts refuses this; the workspace changed meanwhile.
		return fmt.Errorf("apply: %s is no longer a directory", realPath)
	}
	created := realSt == nil
	if created {
		if err := os.Mkdir(realPath, 0o700); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		if realSt, err = lstat(realPath); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		a.chownLike(realPath, st)
		changed = true
	}
	// Filling a directory needs write and search permission on it.
	if realSt.Mode&0o300 != 0o300 && a.euid != 0 {
		if err := os.Chmod(realPath, os.FileMode(realSt.Mode&0o777|0o700)); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
	}
	if err := a.applyDir(rel); err != nil {
		return err
	}
	if realSt.Mode&0o7777 != wantMode {
		changed = true
	}
	if err := unix.Fchmodat(unix.AT_FDCWD, realPath, wantMode, 0); err != nil {
		return fmt.Errorf("apply: chmod %s: %w", realPath, err)
	}
	times := []unix.Timespec{st.Atim, st.Mtim}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, realPath, times, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("apply: set times of %s: %w", realPath, err)
	}
	if changed {
		a.result.Applied++
	}
	// Skipped entries (device nodes, sockets) keep a directory non-empty;
	// Commit removes what remains of the upper layer at the end.
	if err := unix.Rmdir(upperPath); err != nil && !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("apply: remove %s: %w", upperPath, err)
	}
	return nil
}

// savedModeXattr keeps the mode of an upper directory that Commit had to
// make writable (to move its entries out), so that a resumed commit still
// gives the workspace directory the mode the command left.
const savedModeXattr = "user.dsh-tx.mode"

// makeUpperDirWritable returns the mode the workspace directory must end
// with, after giving an unprivileged owner write and search permission on
// the upper directory (root needs none).
func (a *applier) makeUpperDirWritable(upperPath string, st *unix.Stat_t) (uint32, error) {
	wantMode := st.Mode & 0o7777
	if saved, err := getXattr(upperPath, savedModeXattr); err == nil {
		if mode, err := strconv.ParseUint(string(saved), 8, 32); err == nil {
			wantMode = uint32(mode) & 0o7777
		}
	}
	if a.euid == 0 || st.Mode&0o700 == 0o700 {
		return wantMode, nil
	}
	// Best effort: without user xattrs only a resumed commit loses the mode.
	_ = unix.Lsetxattr(upperPath, savedModeXattr, []byte(strconv.FormatUint(uint64(wantMode), 8)), 0)
	if err := unix.Fchmodat(unix.AT_FDCWD, upperPath, st.Mode&0o7777|0o700, 0); err != nil {
		return 0, fmt.Errorf("apply: chmod %s: %w", upperPath, err)
	}
	return wantMode, nil
}

// applyLeaf moves a file, symlink or FIFO into the workspace: a rename
// when the upper layer is on the workspace's filesystem (atomic and
// without copying), else a copy to a temporary name next to it and a
// rename.
func (a *applier) applyLeaf(upperPath, realPath string, st *unix.Stat_t) error {
	realSt, err := lstatIfExists(realPath)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if realSt != nil && isDir(realSt) {
		if err := a.trash(realPath); err != nil {
			return err
		}
		a.result.Removed++
	}
	// The workspace must not inherit overlay metadata: it would confuse a
	// later overlay that uses it as a lower layer.
	if err := removeOverlayXattrs(upperPath); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	err = unix.Rename(upperPath, realPath)
	if errors.Is(err, unix.EXDEV) {
		err = a.copyIntoPlace(upperPath, realPath, st)
		if err == nil {
			err = os.Remove(upperPath)
		}
	}
	if err != nil {
		return fmt.Errorf("apply %s: %w", realPath, err)
	}
	a.result.Applied++
	return nil
}

// copyIntoPlace copies a file, symlink or FIFO into a journaled temporary
// name in realPath's directory, then renames it over realPath.
func (a *applier) copyIntoPlace(upperPath, realPath string, st *unix.Stat_t) error {
	tmp, err := a.journaledName(filepath.Dir(realPath), tempPrefix)
	if err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		target, err := os.Readlink(upperPath)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, tmp); err != nil {
			return err
		}
		a.chownLike(tmp, st)
	case unix.S_IFIFO:
		if err := unix.Mkfifo(tmp, st.Mode&0o777); err != nil {
			return fmt.Errorf("mkfifo %s: %w", tmp, err)
		}
		a.chownLike(tmp, st)
		if err := unix.Fchmodat(unix.AT_FDCWD, tmp, st.Mode&0o7777, 0); err != nil {
			return fmt.Errorf("chmod %s: %w", tmp, err)
		}
	default:
		if err := copyRegular(upperPath, tmp, st, a.euid == 0); err != nil {
			_ = os.Remove(tmp)
			return err
		}
	}
	times := []unix.Timespec{st.Atim, st.Mtim}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, tmp, times, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times of %s: %w", tmp, err)
	}
	return os.Rename(tmp, realPath)
}

// copyRegular copies content, ownership (when root), mode and the
// non-overlay xattrs of a regular file, and fsyncs it.
func copyRegular(src, dst string, st *unix.Stat_t, asRoot bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil && asRoot {
		err = out.Chown(int(st.Uid), int(st.Gid))
	}
	if err == nil {
		// After the chown, which clears set-id bits.
		err = unix.Fchmod(int(out.Fd()), st.Mode&0o7777)
	}
	if err == nil {
		copyXattrs(src, dst)
		err = out.Sync()
	}
	if closeErr := out.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return nil
}

// copyXattrs copies the extended attributes other than overlay's, as far
// as the filesystem and our privileges allow: they are a nicety, not part
// of what a transaction promises.
func copyXattrs(src, dst string) {
	for _, name := range listXattrs(src) {
		if isOverlayXattr(name) {
			continue
		}
		value, err := getXattr(src, name)
		if err != nil {
			continue
		}
		_ = unix.Lsetxattr(dst, name, value, 0)
	}
}

// chownLike gives path the owner of st, when we are root (an unprivileged
// user owns everything it creates anyway). Failures are ignored: the
// content is what the transaction promises.
func (a *applier) chownLike(path string, st *unix.Stat_t) {
	if a.euid == 0 {
		_ = os.Lchown(path, int(st.Uid), int(st.Gid))
	}
}

// trash removes a workspace path by renaming it to a journaled trash name
// in its directory (one atomic step) and then deleting the trash; an
// interrupted commit finishes the deletion from the journal.
func (a *applier) trash(path string) error {
	trashPath, err := a.journaledName(filepath.Dir(path), trashPrefix)
	if err != nil {
		return err
	}
	if err := os.Rename(path, trashPath); err != nil {
		return fmt.Errorf("apply: remove %s: %w", path, err)
	}
	if err := forceRemoveAll(trashPath); err != nil {
		return fmt.Errorf("apply: remove %s: %w", path, err)
	}
	return nil
}

// journaledName picks a random name in dir and records it in the journal
// (fsynced) before anything is created under it.
func (a *applier) journaledName(dir, prefix string) (string, error) {
	var random [8]byte
	if _, err := rand.Read(random[:]); err != nil {
		return "", fmt.Errorf("apply: %w", err)
	}
	name := filepath.Join(dir, prefix+hex.EncodeToString(random[:]))
	if a.journal == nil {
		f, err := os.OpenFile(filepath.Join(a.tx.dir, journalName), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return "", fmt.Errorf("apply: open journal: %w", err)
		}
		a.journal = f
	}
	if _, err := a.journal.WriteString(strconv.Quote(name) + "\n"); err != nil {
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
// makes, inside the workspace, so a damaged journal cannot remove
// anything else.
func (t *Tx) finishJournal() error {
	journalPath := filepath.Join(t.dir, journalName)
	data, err := os.ReadFile(journalPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for scanner.Scan() {
		path, err := strconv.Unquote(scanner.Text())
		if err != nil {
			continue // a line torn by a crash: nothing was created under it
		}
		base := filepath.Base(path)
		if !strings.HasPrefix(base, trashPrefix) && !strings.HasPrefix(base, tempPrefix) || !modes.Within(path, t.workspace) {
			return fmt.Errorf("journal %s names an unexpected path %q", journalPath, path)
		}
		if err := forceRemoveAll(path); err != nil {
			return fmt.Errorf("finish removing %s: %w", path, err)
		}
	}
	if err := scanner.Err(); err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	if err := os.Remove(journalPath); err != nil {
		return fmt.Errorf("remove journal: %w", err)
	}
	return nil
}

// Discard drops the upper layer. The workspace is not touched.
func (t *Tx) Discard() error {
	if err := t.checkUsable(); err != nil {
		return err
	}
	unlock, err := t.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := t.refreshState(); err != nil {
		return err
	}
	if t.state == StateCommitting {
		return fmt.Errorf("transaction %s is partly committed: run Commit again to finish it (discarding now would leave the workspace half-applied)", t.dir)
	}
	for _, p := range []string{t.UpperDir(), t.WorkDir()} {
		if err := forceRemoveAll(p); err != nil {
			return fmt.Errorf("discard transaction %s: %w", t.dir, err)
		}
	}
	return t.writeState(StateDiscarded)
}

// --- filesystem helpers ---

func lstat(path string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	return &st, nil
}

// lstatIfExists returns nil, nil when path does not exist.
func lstatIfExists(path string) (*unix.Stat_t, error) {
	st, err := lstat(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return nil, nil // ENOTDIR: a parent is not a directory (any more)
	}
	return st, err
}

func ctimeNs(st *unix.Stat_t) int64 { return st.Ctim.Nano() }

func isDir(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

// isWhiteout reports overlayfs's mark of a removed path: a character
// device with device number 0:0.
func isWhiteout(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
}

// hasOverlayXattr reports whether path carries overlay's xattr name in
// either namespace (its value may be empty).
func hasOverlayXattr(path, name string) bool {
	for _, prefix := range overlayXattrPrefixes {
		if _, err := unix.Lgetxattr(path, prefix+name, nil); err == nil {
			return true
		}
	}
	return false
}

// isOpaque reports an upper directory that hides the lower directory's
// contents (the command removed and recreated it).
func isOpaque(path string) bool {
	for _, prefix := range overlayXattrPrefixes {
		value, err := getXattr(path, prefix+"opaque")
		if err == nil && string(value) == "y" {
			return true
		}
	}
	return false
}

func isOverlayXattr(name string) bool {
	for _, prefix := range overlayXattrPrefixes {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

func isNoXattr(err error) bool {
	return errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EPERM)
}

func getXattr(path, name string) ([]byte, error) {
	size, err := unix.Lgetxattr(path, name, nil)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	n, err := unix.Lgetxattr(path, name, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

func listXattrs(path string) []string {
	size, err := unix.Llistxattr(path, nil)
	if err != nil || size == 0 {
		return nil
	}
	buf := make([]byte, size)
	n, err := unix.Llistxattr(path, buf)
	if err != nil {
		return nil
	}
	var names []string
	for _, name := range bytes.Split(buf[:n], []byte{0}) {
		if len(name) > 0 {
			names = append(names, string(name))
		}
	}
	return names
}

func removeOverlayXattrs(path string) error {
	for _, name := range listXattrs(path) {
		if !isOverlayXattr(name) {
			continue
		}
		err := unix.Lremovexattr(path, name)
		if errors.Is(err, unix.EACCES) {
			// A user.* xattr needs write permission on the file, which
			// its owner may have taken from itself (git's objects are
			// 0444): lend it for the removal.
			err = withOwnerWrite(path, func() error { return unix.Lremovexattr(path, name) })
		}
		if err != nil && !isNoXattr(err) {
			return fmt.Errorf("remove xattr %s of %s: %w", name, path, err)
		}
	}
	return nil
}

// probeUserXattrs checks that the filesystem of dir keeps user.* xattrs:
// the overlay marks opaque directories and copied-up files with them, and
// without them removing a directory inside it fails (EIO). tmpfs keeps
// them only from Linux 6.6.
func probeUserXattrs(dir string) error {
	const probe = "user.dsh-tx.probe"
	err := unix.Setxattr(dir, probe, []byte("1"), 0)
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%w: %s is on a filesystem without user extended attributes (tmpfs before Linux 6.6, for one), which the overlay's upper layer needs: put the transaction directory on another filesystem", ErrUnsupported, filepath.Dir(dir))
	}
	if err != nil {
		return fmt.Errorf("transaction directory %s: user extended attributes: %w", filepath.Dir(dir), err)
	}
	return unix.Removexattr(dir, probe)
}

// withOwnerWrite runs f with the owner's write bit set on the regular file
// or directory path, then puts its mode back.
func withOwnerWrite(path string, f func() error) error {
	st, err := lstat(path)
	if err != nil {
		return err
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFDIR {
		return f()
	}
	mode := st.Mode & 0o7777
	if err := unix.Chmod(path, mode|0o200); err != nil {
		return err
	}
	ferr := f()
	if err := unix.Chmod(path, mode); err != nil && ferr == nil {
		return err
	}
	return ferr
}

// sameContent compares two regular files byte by byte.
func sameContent(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
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

// sameEntry reports whether the workspace already holds exactly the upper
// entry: same type, mode and content (or symlink target).
func sameEntry(upperPath string, st *unix.Stat_t, realPath string, realSt *unix.Stat_t) (bool, error) {
	if st.Mode != realSt.Mode {
		return false, nil
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if st.Size != realSt.Size {
			return false, nil
		}
		return sameContent(upperPath, realPath)
	case unix.S_IFLNK:
		a, errA := os.Readlink(upperPath)
		b, errB := os.Readlink(realPath)
		return errA == nil && errB == nil && a == b, nil
	case unix.S_IFIFO:
		return true, nil
	}
	return false, nil
}

func readDirNames(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// forceRemoveAll removes path like os.RemoveAll, first making directories
// searchable and writable where needed (overlay leaves work/work with
// mode 0000; a command may leave read-only directories behind).
func forceRemoveAll(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	makeTreeWritable(path)
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

func makeTreeWritable(path string) {
	st, err := lstat(path)
	if err != nil || !isDir(st) {
		return
	}
	_ = os.Chmod(path, 0o700)
	names, err := readDirNames(path)
	if err != nil {
		return
	}
	for _, name := range names {
		makeTreeWritable(filepath.Join(path, name))
	}
}

func syncDir(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// syncFilesystem flushes the workspace's filesystem once, instead of an
// fsync per renamed file, so that a committed transaction is durable.
func syncFilesystem(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
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
