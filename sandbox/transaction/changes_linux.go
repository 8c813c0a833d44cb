package transaction

import (
	"fmt"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/changes"
)

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
