//go:build linux

package seccomp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Notif is one user notification: a system call of a filtered process that
// waits for the supervisor's answer (struct seccomp_notif).
type Notif struct {
	ID    uint64
	Pid   uint32 // the calling thread, as the listener's pid namespace sees it
	Flags uint32
	Nr    int32 // system call number
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

// notifResp is struct seccomp_notif_resp.
type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// The supervisor talks to the listener with raw ioctls rather than through
// libseccomp: no allocation and no cgo call per notification, which matters
// because every write-like call of a sandboxed command makes one.

// Receive waits for the next notification on listener fd.
func Receive(fd int, n *Notif) error {
	*n = Notif{} // the kernel requires a zeroed buffer
	return ioctl(fd, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(n))
}

// Continue lets the notified call run in the kernel, where every other layer
// still applies.
func Continue(fd int, id uint64) error {
	r := notifResp{ID: id, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	return ioctl(fd, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&r))
}

// Fail answers the notified call with -errno.
func Fail(fd int, id uint64, errno unix.Errno) error {
	r := notifResp{ID: id, Error: -int32(errno)}
	return ioctl(fd, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&r))
}

// Return answers the notified call with val, as if it had succeeded.
func Return(fd int, id uint64, val int64) error {
	r := notifResp{ID: id, Val: val}
	return ioctl(fd, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&r))
}

// Valid reports whether notification id is still pending: its process has
// not died and its pid cannot have been reused.
func Valid(fd int, id uint64) bool {
	return ioctl(fd, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, unsafe.Pointer(&id)) == nil
}

// notifAddfd is struct seccomp_notif_addfd.
type notifAddfd struct {
	ID         uint64
	Flags      uint32
	SrcFD      uint32
	NewFD      uint32
	NewFDFlags uint32
}

// ReplaceFD installs a duplicate of the supervisor's srcfd in the process of
// notification id at descriptor number newfd, atomically replacing (and
// closing) whatever newfd held, as dup2 would (SECCOMP_IOCTL_NOTIF_ADDFD with
// SECCOMP_ADDFD_FLAG_SETFD, Linux 5.9); cloexec sets O_CLOEXEC on it. The
// notification must still be pending (ENOENT otherwise); the call itself is
// then answered separately. Older kernels refuse the ioctl (EINVAL).
func ReplaceFD(fd int, id uint64, srcfd, newfd int, cloexec bool) error {
	if srcfd < 0 || newfd < 0 {
		return unix.EBADF
	}
	a := notifAddfd{ID: id, Flags: unix.SECCOMP_ADDFD_FLAG_SETFD, SrcFD: uint32(srcfd), NewFD: uint32(newfd)}
	if cloexec {
		a.NewFDFlags = unix.O_CLOEXEC
	}
	return ioctl(fd, unix.SECCOMP_IOCTL_NOTIF_ADDFD, unsafe.Pointer(&a))
}

// SetSyncWakeup asks the kernel (6.6+) to wake the supervisor and the waiting
// process synchronously, which shortens every round trip; older kernels
// refuse and nothing changes.
func SetSyncWakeup(fd int) {
	const fdSyncWakeUp = 1 // SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
	unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, fdSyncWakeUp)
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}
