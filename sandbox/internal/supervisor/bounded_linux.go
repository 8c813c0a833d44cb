//go:build linux

package supervisor

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// The supervisor performs connect, sendto, sendmsg and sendmmsg for the
// command, on its own copy of the command's socket (which shares the open
// file description, and so O_NONBLOCK, with the command's). It is outside
// the sandbox, so it must never block on the command's behalf: a socket the
// command filled itself, a host listener whose backlog is full, a datagram
// socket that never reads would otherwise hold it — and Wait with it —
// forever, the copy keeping even the command's own socketpair alive. So no
// emulated call ever blocks in the kernel: sends go out with MSG_DONTWAIT and
// a blocking connect waits in short SO_SNDTIMEO slices, and between attempts
// the supervisor waits (poll, a short slice) while checking that the
// notification is still pending and that the notifier has not been stopped.
// A call whose notification is gone — the command was killed, or a signal
// interrupted the call and its handler must run — is abandoned without an
// answer; so is every call once the notifier stops (closing the listener
// then fails them with ENOSYS). The command's own semantics hold: a
// non-blocking socket or MSG_DONTWAIT gets EAGAIN at once, as from the
// kernel, and its own SO_SNDTIMEO ends the wait with EAGAIN.

// errAbandoned means an emulated call must get no answer: its notification
// is no longer pending, or the notifier stopped.
var errAbandoned = errors.New("sandbox: emulated call abandoned")

const (
	// waitSlice is the longest the supervisor waits between two checks that
	// an emulated call is still wanted.
	waitSlice = 20 * time.Millisecond
	// maxBackoff caps the wait between retries when poll cannot tell when
	// a send will succeed (a datagram to a full unconnected peer: the
	// sender's own socket looks writable).
	maxBackoff = 50 * time.Millisecond
)

// blocking is one emulated call on socket fd (the supervisor's copy) that
// may have to wait.
type blocking struct {
	n        *Notifier
	req      *seccomp.Notif
	fd       int
	nonblock bool      // the command's socket is O_NONBLOCK
	deadline time.Time // from the command's SO_SNDTIMEO; zero: none
	spurious bool      // poll reported POLLOUT, yet the call could not proceed
	backoff  time.Duration
}

// newBlocking reads what the command asked of its socket: O_NONBLOCK and
// SO_SNDTIMEO.
func (n *Notifier) newBlocking(req *seccomp.Notif, fd int) (*blocking, error) {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return nil, err
	}
	b := &blocking{n: n, req: req, fd: fd, nonblock: fl&unix.O_NONBLOCK != 0, backoff: time.Millisecond}
	tv, err := unix.GetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO)
	if err != nil {
		return nil, err
	}
	if d := time.Duration(tv.Nano()); d > 0 {
		b.deadline = time.Now().Add(d)
	}
	return b, nil
}

// wait waits, at most one slice, until the socket may accept the call, and
// reports whether to try again: nil, errAbandoned, or EAGAIN once the
// command's own send timeout has passed.
func (b *blocking) wait() error {
	slice := waitSlice
	fds := []unix.PollFd{{Fd: int32(b.n.stopR), Events: unix.POLLIN}}
	if b.spurious {
		slice, b.backoff = b.backoff, min(2*b.backoff, maxBackoff)
	} else {
		fds = append(fds, unix.PollFd{Fd: int32(b.fd), Events: unix.POLLOUT})
	}
	if !b.deadline.IsZero() {
		slice = min(slice, time.Until(b.deadline))
	}
	if slice > 0 {
		ms := int((slice + time.Millisecond - 1) / time.Millisecond)
		if _, err := unix.Poll(fds, ms); err != nil && err != unix.EINTR {
			return err
		}
	}
	if len(fds) > 1 && fds[1].Revents != 0 {
		b.spurious = true // if the retry fails too, poll cannot tell: back off
	}
	return b.check()
}

// check reports whether the call is still wanted: errAbandoned when its
// notification is gone or the notifier stopped, EAGAIN when the command's
// own send timeout has passed.
func (b *blocking) check() error {
	if b.n.stopped() || !seccomp.Valid(b.n.fd, b.req.ID) {
		return errAbandoned
	}
	if !b.deadline.IsZero() && !time.Now().Before(b.deadline) {
		return unix.EAGAIN
	}
	return nil
}

// send performs one send on the command's behalf: try as the supervisor
// (MSG_DONTWAIT, which does not change the shared file description); when
// the socket is full and the command's call would block, wait and try
// again. mayWait false never waits (a later message of a sendmmsg: the
// kernel returns the count sent so far, and waiting after data went out
// could let an interrupted, restarted call send it twice). A stream send
// that fits only in part returns the short count at once, for the same
// reason.
func (b *blocking) send(flags int, mayWait bool, try func(flags int) (int, error)) (int, error) {
	cmdNonblock := b.nonblock || flags&unix.MSG_DONTWAIT != 0
	for {
		r, err := try(flags | unix.MSG_DONTWAIT | unix.MSG_NOSIGNAL)
		switch {
		case err == unix.EINTR:
			continue
		case err != unix.EAGAIN || cmdNonblock || !mayWait:
			return r, err
		}
		if werr := b.wait(); werr != nil {
			return 0, werr
		}
	}
}

// connect connects the command's socket as its own connect would, without
// blocking the supervisor. A unix stream connect blocks only while the
// listener's backlog is full, which poll cannot see; the kernel bounds that
// wait by the socket's SO_SNDTIMEO, so the supervisor sets a short one for
// each attempt and puts the command's back afterwards.
func (b *blocking) connect(sa unix.Sockaddr) error {
	typ, err := unix.GetsockoptInt(b.fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return err
	}
	if b.nonblock || (typ != unix.SOCK_STREAM && typ != unix.SOCK_SEQPACKET) {
		return retryEINTR(func() error { return unix.Connect(b.fd, sa) })
	}
	orig, err := unix.GetsockoptTimeval(b.fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO)
	if err != nil {
		return err
	}
	defer unix.SetsockoptTimeval(b.fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, orig)
	for {
		slice := waitSlice
		if !b.deadline.IsZero() {
			slice = min(slice, time.Until(b.deadline))
		}
		if slice <= 0 {
			return unix.EAGAIN // the command's own timeout
		}
		tv := unix.NsecToTimeval(int64(max(slice, time.Millisecond)))
		if err := unix.SetsockoptTimeval(b.fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
			return err
		}
		err := unix.Connect(b.fd, sa)
		if err != unix.EAGAIN && err != unix.EINTR {
			return err
		}
		// The backlog stayed full for a slice (or a signal of ours cut it
		// short): is the call still wanted?
		if werr := b.check(); werr != nil {
			return werr
		}
	}
}

func retryEINTR(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}
