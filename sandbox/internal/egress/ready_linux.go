package egress

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// waitReadable blocks until c has bytes to read, its end or an error,
// without reading them (a MSG_PEEK of one byte, in the runtime's poller),
// so that a relay borrows its buffer only then. A connection without a
// file descriptor returns at once; a closed one returns an error.
func waitReadable(c net.Conn) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var b [1]byte
	return rc.Read(func(fd uintptr) bool {
		for {
			_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			switch err {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false // wait for the poller
			}
			return true // bytes, the end, or an error for Read to return
		}
	})
}
