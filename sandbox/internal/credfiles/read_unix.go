//go:build unix

package credfiles

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Read returns the content of the credential file at p: opened without
// following a symbolic link in its last component, a regular file of at
// most MaxSize bytes.
func Read(p string) ([]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrUnparsable, p)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrUnparsable, p, MaxSize)
	}
	return data, nil
}
