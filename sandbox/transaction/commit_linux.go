package transaction

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// errInterrupted is what the test hook stopAfterEntries returns.
var errInterrupted = errors.New("commit interrupted (test hook)")

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
