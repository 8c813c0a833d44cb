package transaction

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

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
