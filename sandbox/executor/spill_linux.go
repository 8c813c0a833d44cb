//go:build linux

package executor

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// spillDir is an executor's private spill directory, held open from its
// creation: spill files are created and removed relative to its descriptor,
// never by path. The directory lies under /tmp, which confined commands may
// write; whatever they rename, remove or plant there, the supervisor's
// writes land in the directory it made (read-only inside every sandbox),
// and a name it did not create is never opened (O_EXCL|O_NOFOLLOW).
type spillDir struct {
	path string   // canonical, for the policy and the advertised spill paths
	fd   *os.File // the directory itself
}

// newSpillDir creates a fresh 0700 directory under parent and opens it.
func newSpillDir(parent string) (*spillDir, error) {
	path, err := os.MkdirTemp(parent, "dsh-sandbox-spill-")
	if err != nil {
		return nil, fmt.Errorf("cannot create the spill directory: %w", err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("spill directory: %w", &os.PathError{Op: "open", Path: path, Err: err})
	}
	d := &spillDir{path: path, fd: os.NewFile(uintptr(fd), path)}
	if err := unix.Fchmod(fd, 0o700); err != nil {
		d.close()
		return nil, fmt.Errorf("spill directory: %w", &os.PathError{Op: "chmod", Path: path, Err: err})
	}
	if c, err := filepath.EvalSymlinks(path); err == nil {
		d.path = c
	}
	return d, nil
}

// create makes the new file name in the directory (0600), and returns it
// with the function that removes it again.
func (d *spillDir) create(name string) (*os.File, func(), error) {
	fd, err := unix.Openat(int(d.fd.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, nil, &os.PathError{Op: "create", Path: filepath.Join(d.path, name), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.path, name))
	remove := func() { unix.Unlinkat(int(d.fd.Fd()), name, 0) }
	if err := f.Chmod(0o600); err != nil { // whatever the umask made of it
		f.Close()
		remove()
		return nil, nil, err
	}
	return f, remove, nil
}

// close removes the directory when it is empty (by path: every command of
// the executor has ended by then, and what a path names at worst is a
// stranger's empty directory or a symlink, which rmdir leaves alone), and
// closes it.
func (d *spillDir) close() {
	unix.Rmdir(d.path)
	d.fd.Close()
}
