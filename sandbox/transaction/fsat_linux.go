package transaction

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Everything this package does in a transaction directory or a workspace
// goes through directory descriptors, one name at a time, never following
// a symlink: the directory and the workspace may hold entries a confined
// command made, and a path resolved twice could lead somewhere else the
// second time.

// openNoSymlinks opens the absolute path with flags, refusing every
// symlink on the way (openat2 RESOLVE_NO_SYMLINKS, Linux 5.6).
func openNoSymlinks(path string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	return openat2Retry(unix.AT_FDCWD, path, &how)
}

// openBeneath opens rel (a relative path of several components) under the
// directory dirfd, refusing symlinks and any way out of dirfd.
func openBeneath(dirfd int, rel string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	return openat2Retry(dirfd, rel, &how)
}

func openat2Retry(dirfd int, path string, how *unix.OpenHow) (int, error) {
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, path, how)
		// EAGAIN: a rename raced the lookup (RESOLVE_* asks for a retry).
		if (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)) && i < 16 {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

// openAt opens the single name in dirfd without following a symlink there.
func openAt(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return fd, nil
	}
}

// openDirAt opens the directory name in dirfd; a symlink there is refused.
func openDirAt(dirfd int, name string) (int, error) {
	return openAt(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
}

// statAt lstats name in dirfd.
func statAt(dirfd int, name string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: err}
	}
	return &st, nil
}

// statAtIfExists is statAt with nil, nil for a missing name.
func statAtIfExists(dirfd int, name string) (*unix.Stat_t, error) {
	st, err := statAt(dirfd, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return st, err
}

func fstat(fd int) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat: %w", err)
	}
	return &st, nil
}

// listDir returns the names in the directory dirfd (a fresh descriptor of
// it is read, so dirfd's own offset does not matter).
func listDir(dirfd int) ([]string, error) {
	fd, err := openAt(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}

// procPath names the file behind fd for calls that take only a path (the
// magic link reaches exactly that inode, whatever its name is now).
func procPath(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

// withAccess runs f on the directory name in dirfd opened for reading;
// when its mode denies its owner (an unprivileged user) reading or search,
// those bits are lent through the descriptor for the call and put back
// after. lent says whether the mode was changed (its ctime then is).
func withDirAccess(dirfd int, name string, f func(fd int) error) (lent bool, err error) {
	fd, err := openDirAt(dirfd, name)
	if errors.Is(err, fs.ErrPermission) {
		pfd, perr := openAt(dirfd, name, unix.O_PATH|unix.O_DIRECTORY)
		if perr != nil {
			return false, perr
		}
		defer unix.Close(pfd)
		st, serr := fstat(pfd)
		if serr != nil {
			return false, serr
		}
		mode := st.Mode & 0o7777
		if err := unix.Chmod(procPath(pfd), mode|0o500); err != nil {
			return false, fmt.Errorf("chmod %s: %w", name, err)
		}
		defer unix.Chmod(procPath(pfd), mode)
		lent = true
		fd, err = openAt(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY)
	}
	if err != nil {
		return lent, err
	}
	defer unix.Close(fd)
	return lent, f(fd)
}

// openFileForRead opens the regular file name in dirfd for reading,
// lending its owner the read bit when the mode lacks it (the bit is put
// back before returning; the file stays open).
func openFileForRead(dirfd int, name string) (*os.File, error) {
	fd, err := openAt(dirfd, name, unix.O_RDONLY)
	if errors.Is(err, fs.ErrPermission) {
		pfd, perr := openAt(dirfd, name, unix.O_PATH)
		if perr != nil {
			return nil, perr
		}
		defer unix.Close(pfd)
		st, serr := fstat(pfd)
		if serr != nil {
			return nil, serr
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil, fmt.Errorf("%s: not a regular file", name)
		}
		mode := st.Mode & 0o7777
		if err := unix.Chmod(procPath(pfd), mode|0o400); err != nil {
			return nil, fmt.Errorf("chmod %s: %w", name, err)
		}
		fd, err = openAt(pfd, "", unix.O_RDONLY)
		if err != nil {
			fd, err = unix.Open(procPath(pfd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		}
		_ = unix.Chmod(procPath(pfd), mode)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// removeAllAt removes name in dirfd and, for a directory, everything in
// it, without following a symlink anywhere. Directories its owner cannot
// write or search (a command may leave them so; overlayfs leaves work/work
// 0000) are made so through their descriptor first.
func removeAllAt(dirfd int, name string) error {
	st, err := statAtIfExists(dirfd, name)
	if err != nil || st == nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Unlinkat(dirfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return &fs.PathError{Op: "unlink", Path: name, Err: err}
		}
		return nil
	}
	if st.Mode&0o700 != 0o700 && os.Geteuid() != 0 {
		pfd, err := openAt(dirfd, name, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		err = unix.Chmod(procPath(pfd), 0o700)
		unix.Close(pfd)
		if err != nil {
			return &fs.PathError{Op: "chmod", Path: name, Err: err}
		}
	}
	fd, err := openDirAt(dirfd, name)
	if err != nil {
		return err
	}
	names, err := listDir(fd)
	if err == nil {
		for _, n := range names {
			if err = removeAllAt(fd, n); err != nil {
				break
			}
		}
	}
	unix.Close(fd)
	if err != nil {
		return fmt.Errorf("%s/%w", name, err)
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return &fs.PathError{Op: "rmdir", Path: name, Err: err}
	}
	return nil
}

// fgetxattr returns the value of the xattr name of the open file fd.
func fgetxattr(fd int, name string) ([]byte, error) {
	size, err := unix.Fgetxattr(fd, name, nil)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	n, err := unix.Fgetxattr(fd, name, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// flistxattr lists the xattr names of the open file fd.
func flistxattr(fd int) []string {
	size, err := unix.Flistxattr(fd, nil)
	if err != nil || size == 0 {
		return nil
	}
	buf := make([]byte, size)
	n, err := unix.Flistxattr(fd, buf)
	if err != nil {
		return nil
	}
	var names []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name != "" {
			names = append(names, name)
		}
	}
	return names
}

// hasOverlayXattrFD reports whether the open file fd carries overlay's
// xattr name in either namespace (its value may be empty).
func hasOverlayXattrFD(fd int, name string) bool {
	for _, prefix := range overlayXattrPrefixes {
		if _, err := unix.Fgetxattr(fd, prefix+name, nil); err == nil {
			return true
		}
	}
	return false
}

// isOpaqueFD reports an upper directory that hides the lower directory's
// contents (the command removed and recreated it).
func isOpaqueFD(fd int) bool {
	for _, prefix := range overlayXattrPrefixes {
		if v, err := fgetxattr(fd, prefix+"opaque"); err == nil && string(v) == "y" {
			return true
		}
	}
	return false
}
