//go:build linux

package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// The control socket's messages travel with SCM_RIGHTS (Linux).

// SendBytes sends one message, with oob (e.g. unix.UnixRights) attached.
func SendBytes(f *os.File, b, oob []byte) error {
	return unix.Sendmsg(int(f.Fd()), b, oob, nil, 0)
}

// SendMsg sends m as JSON, with fd attached when it is not -1.
func SendMsg(f *os.File, m any, fd int) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	return unix.Sendmsg(int(f.Fd()), b, oob, nil, 0)
}

// RecvMsg reads one message; fd is -1 unless the message carried one.
// io.EOF-like closure is reported as ErrClosed, once every message the
// runner sent is read.
func RecvMsg(f *os.File, v any) (fd int, err error) {
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, flags, _, err := unix.Recvmsg(int(f.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == syscall.EINTR || err == syscall.ECONNRESET {
			// ECONNRESET: the runner ended with messages of ours unread
			// (one that failed before reading its whole spec). The kernel
			// says so once, ahead of what the runner sent, which is
			// still to be read: its fail message, then the end.
			continue
		}
		if err != nil {
			return -1, err
		}
		if n == 0 {
			return -1, ErrClosed
		}
		fd = -1
		if oobn > 0 {
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err == nil && len(msgs) > 0 {
				if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) > 0 {
					fd = fds[0]
				}
			}
		}
		if flags&unix.MSG_CTRUNC != 0 {
			// The runner sends one descriptor at most, which the buffer
			// holds: the kernel could not install it here (no
			// descriptor left under RLIMIT_NOFILE), and dropped it.
			if fd >= 0 {
				unix.Close(fd)
			}
			return -1, fmt.Errorf("control message: its descriptor was dropped: %w", unix.EMFILE)
		}
		if err := json.Unmarshal(buf[:n], v); err != nil {
			if fd >= 0 {
				unix.Close(fd)
			}
			return -1, fmt.Errorf("control message: %w", err)
		}
		return fd, nil
	}
}
