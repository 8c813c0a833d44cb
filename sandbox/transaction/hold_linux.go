package transaction

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

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
