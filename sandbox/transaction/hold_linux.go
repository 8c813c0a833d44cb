package transaction

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Hold marks the transaction in use by a command: it returns its
// directory opened with a shared flock, which Commit and Discard (taking it
// exclusive) refuse to wait for, so that the upper layer is never moved
// into the workspace while a command writes to it. The lock lasts while
// the file is open in any process: the sandbox hands it to the runner's
// own processes, which outlive the command's overlay. It fails when the
// transaction is not open as its directory says now (another process may
// have committed or discarded it since it was opened, or be committing
// it), or is being committed or discarded.
func (t *Tx) Hold() (*os.File, error) {
	fd, err := unix.Open(t.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("transaction %s: %w", t.dir, err)
	}
	f := os.NewFile(uintptr(fd), t.dir)
	if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("transaction %s is busy: it is being committed or discarded", t.dir)
		}
		return nil, fmt.Errorf("transaction %s: %w", t.dir, err)
	}
	now, err := Open(t.dir)
	if err == nil && now.state != StateOpen {
		err = fmt.Errorf("transaction %s is %s: a command cannot run in it (commit it again to finish)", t.dir, now.state)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
