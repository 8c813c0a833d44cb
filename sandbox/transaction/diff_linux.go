package transaction

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/internal/printable"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/changes"
)

// Diff writes a unified diff of the transaction's changes against the
// workspace, in the order of Changes. Text files get hunks with three
// lines of context; binary and over-large files, directories, symlinks and
// mode changes get one-line notes. Names and lines are written with their
// control characters escaped (package internal/printable), so that what
// the command wrote cannot hide a change or fake a header. When no command
// of the transaction runs, the upper layer must match its seal (an error
// wrapping ErrTampered otherwise): the diff shows what Commit would apply.
func (t *Tx) Diff(w io.Writer, opt DiffOptions) error {
	if opt.MaxFileBytes <= 0 {
		opt.MaxFileBytes = defaultMaxFileBytes
	}
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = defaultMaxBytes
	}
	v, err := t.review()
	if err != nil {
		return err
	}
	defer v.close()
	list, err := v.changes()
	if err != nil {
		return err
	}
	out := &limitedWriter{w: w, max: opt.MaxBytes}
	for _, c := range list {
		if err := v.diffChange(out, c, opt); err != nil {
			if errors.Is(err, errTruncated) {
				return out.finishTruncated()
			}
			return err
		}
	}
	return nil
}

// side is one side of a diffed path: its directory's descriptor (-1 when
// the directory is missing) and the entry's name and lstat there.
type side struct {
	dirfd int
	name  string
	st    *unix.Stat_t
}

// openSide opens the directory of rel beneath root (without following a
// symlink) and lstats rel's entry there.
func openSide(root int, rel string) (side, error) {
	sd := side{dirfd: -1, name: filepath.Base(rel)}
	dir := filepath.Dir(rel)
	fd, err := openBeneath(root, dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return sd, nil
		}
		return sd, err
	}
	sd.dirfd = fd
	if sd.st, err = statAtIfExists(fd, sd.name); err != nil {
		unix.Close(fd)
		return side{dirfd: -1}, err
	}
	return sd, nil
}

func (sd side) close() {
	if sd.dirfd >= 0 {
		unix.Close(sd.dirfd)
	}
}

func (sd side) exists() bool { return sd.st != nil }

func (v *view) diffChange(out *limitedWriter, c Change, opt DiffOptions) error {
	rel, err := filepath.Rel(v.t.workspace, c.Path)
	if err != nil {
		return fmt.Errorf("diff %s: %w", c.Path, err)
	}
	old, err := openSide(v.ws, rel)
	if err != nil {
		return fmt.Errorf("diff %s: %w", c.Path, err)
	}
	defer old.close()
	shown := printable.Name(rel)

	switch c.Op {
	case "removed":
		switch {
		case !old.exists():
			return nil
		case isDir(old.st):
			return out.line("Removed directory " + shown + "\n")
		case old.st.Mode&unix.S_IFMT == unix.S_IFREG:
			return v.diffFiles(out, rel, old, side{dirfd: -1}, opt)
		case old.st.Mode&unix.S_IFMT == unix.S_IFLNK:
			target, _ := readlinkAt(old.dirfd, old.name)
			return out.line("Removed symlink " + shown + " -> " + printable.Name(target) + "\n")
		default:
			return out.line("Removed special file " + shown + "\n")
		}
	case "mode":
		return out.line(fmt.Sprintf("Mode of %s changed from %04o to %s\n", shown, permBits(old.st), c.Mode))
	}

	// created or modified: describe the old side when its kind differs.
	if old.exists() && c.Op == "modified" {
		if oldType := changes.TypeOf(old.st.Mode); oldType != c.Type {
			if err := out.line(fmt.Sprintf("Type of %s changed from %s to %s\n", shown, oldType, c.Type)); err != nil {
				return err
			}
			old.st = nil // show the new content as created
		} else if c.Mode != "" && fmt.Sprintf("%04o", permBits(old.st)) != c.Mode {
			if err := out.line(fmt.Sprintf("Mode of %s changed from %04o to %s\n", shown, permBits(old.st), c.Mode)); err != nil {
				return err
			}
		}
	}
	nu, err := openSide(v.upper, rel)
	if err != nil {
		return fmt.Errorf("diff %s: %w", c.Path, err)
	}
	defer nu.close()
	switch c.Type {
	case "file":
		return v.diffFiles(out, rel, old, nu, opt)
	case "dir":
		if c.Op == "modified" {
			return out.line("Replaced directory " + shown + "\n")
		}
		return out.line("New directory " + shown + "\n")
	case "symlink":
		target, err := readlinkAt(nu.dirfd, nu.name)
		if err != nil {
			return fmt.Errorf("diff %s: %w", c.Path, err)
		}
		if old.exists() {
			oldTarget, _ := readlinkAt(old.dirfd, old.name)
			return out.line("Symlink " + shown + " changed from " + printable.Name(oldTarget) + " to " + printable.Name(target) + "\n")
		}
		return out.line("New symlink " + shown + " -> " + printable.Name(target) + "\n")
	default:
		return out.line("New special file " + shown + "\n")
	}
}

// diffFiles writes the unified diff of two regular files; a side that
// does not exist stands for /dev/null.
func (v *view) diffFiles(out *limitedWriter, rel string, old, nu side, opt DiffOptions) error {
	shown := printable.Name(rel)
	oldName, newName := "a/"+shown, "b/"+shown
	if !old.exists() {
		oldName = "/dev/null"
	}
	if !nu.exists() {
		newName = "/dev/null"
	}
	oldData, tooLargeOld, err := readBounded(old, opt.MaxFileBytes)
	if err != nil {
		return err
	}
	newData, tooLargeNew, err := readBounded(nu, opt.MaxFileBytes)
	if err != nil {
		return err
	}
	if tooLargeOld || tooLargeNew {
		return out.line("File a/" + shown + " too large to diff\n")
	}
	if isBinary(oldData) || isBinary(newData) {
		if string(oldData) == string(newData) {
			return nil
		}
		return out.line("Binary files " + oldName + " and " + newName + " differ\n")
	}
	return writeUnified(out, oldName, newName, splitLines(oldData), splitLines(newData))
}

// readBounded reads a side's regular file unless it is larger than limit;
// a missing side reads as empty.
func readBounded(sd side, limit int64) (data []byte, tooLarge bool, err error) {
	if !sd.exists() {
		return nil, false, nil
	}
	f, err := openFileForRead(sd.dirfd, sd.name)
	if err != nil {
		return nil, false, fmt.Errorf("diff: %w", err)
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, fmt.Errorf("diff: read %s: %w", sd.name, err)
	}
	if int64(len(data)) > limit {
		return nil, true, nil
	}
	return data, false, nil
}

func permBits(st *unix.Stat_t) uint32 {
	if st == nil {
		return 0
	}
	return st.Mode & 0o7777
}
