package transaction

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// maxClockWait bounds how long Create waits for the file timestamp clock
// to tick (a tick is a few milliseconds).
const maxClockWait = 2 * time.Second

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
