package transaction

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strings"

	"golang.org/x/sys/unix"
)

// --- filesystem helpers ---

// Overlayfs keeps its metadata in xattrs named <prefix>overlay.<name>:
// "user." when mounted with userxattr (unprivileged mounts), "trusted."
// otherwise.
var overlayXattrPrefixes = [...]string{"user.overlay.", "trusted.overlay."}

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
