package transaction

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

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
