package transaction

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// tempPrefix names the files Commit writes into the workspace before
// renaming them into place.
const tempPrefix = ".dsh-tx-tmp-"

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
