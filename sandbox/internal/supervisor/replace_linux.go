//go:build linux

package supervisor

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// Without pidfd_getfd — Docker's default seccomp profile refuses it without
// CAP_SYS_PTRACE, Linux before 5.6 lacks it — the supervisor cannot take a
// copy of the command's socket to bind, connect or send on. It never lets
// such a call continue instead: the address and the msghdr lie in memory
// the command can rewrite after the check, and the descriptor number is one
// it can dup2 another socket onto, so a continued call could reach a host
// socket (docker.sock in a dev container) or squat an abstract name.
//
// What it does is replace the command's socket. It learns the socket from
// outside — its inode from /proc/PID/fd/N, its flags from
// /proc/PID/fdinfo/N, its family, type, state, bound name and peer from
// sock_diag (unix_diag, by inode) — and only for a unix socket that is
// fresh for the call (neither bound nor connected) it makes a socket of the
// same type itself, installs it at the command's descriptor number
// (SECCOMP_IOCTL_NOTIF_ADDFD with SECCOMP_ADDFD_FLAG_SETFD: atomic, like
// dup2, O_CLOEXEC as the command had it, O_NONBLOCK and the inode's mode
// kept) — from then on its own descriptor is a copy of the command's
// socket, as pidfd_getfd would have given — and performs the checked bind
// (on the restricted thread) or connect on it. A call that fails, or is
// abandoned, leaves the command a socket as fresh as its own was. A
// datagram sent with a destination from an unbound socket goes out from a
// fresh socket of the supervisor's (the receiver can no more reply to an
// unbound sender than before). Everything else — a bound or connected
// socket, another family, control data, a sendmsg on a connected socket —
// is refused with EACCES and a fact that says this host cannot emulate it,
// or answered with the errno the kernel gives without acting (EISCONN for
// a connected stream socket's connect, EINVAL for a second bind, ENOTCONN
// for a sendmsg without a destination on an unconnected socket).
//
// What a replacement loses: socket options set before the call
// (SO_PASSCRED, buffer sizes, SO_SNDTIMEO), file status flags but
// O_NONBLOCK (O_ASYNC, F_SETOWN), an epoll registration made before the
// call, and every other descriptor of the old socket: one dup'ed before the
// call, or inherited by a child, keeps the old, unbound socket. A peer sees
// the supervisor's pid in SO_PEERCRED, as with a copy.

// NoPidfdGetfd tells the notifier that this host refuses pidfd_getfd: it
// then replaces sockets rather than copying them, and refuses what it
// cannot replace. Call it before Run.
func (n *Notifier) NoPidfdGetfd() { n.nocopy = true }

// reasonNoGetfd begins the reason of a call refused because this host has
// no pidfd_getfd.
const reasonNoGetfd = "no pidfd_getfd on this host: "

// unemulated refuses a call the supervisor cannot perform here, with a fact
// saying why.
func (n *Notifier) unemulated(rule seccomp.Rule, path, addr, why string) verdict {
	v := n.deny(rule, unix.EACCES, path, addr)
	v.fact.Reason = reasonNoGetfd + why
	return v
}

// Socket states as unix_diag reports them (the TCP names the kernel
// reuses for unix sockets).
const (
	tcpEstablished = 1
	tcpClose       = 7
	tcpListen      = 10
)

// cmdSocket is what the supervisor learns of one of the command's unix
// sockets without a copy of it.
type cmdSocket struct {
	typ   int   // SOCK_STREAM, SOCK_DGRAM or SOCK_SEQPACKET
	state uint8 // tcpClose, tcpListen, tcpEstablished
	bound bool  // it has a name: a path, an abstract or autobound one
	peer  bool  // it is connected
	// mode is the permission bits of the socket's inode (a server may
	// fchmod its socket before bind: the socket file gets them).
	mode     uint32
	nonblock bool
	cloexec  bool
}

// fresh reports whether a replacement of s loses nothing of its state:
// unbound and unconnected.
func (s cmdSocket) fresh() bool { return !s.bound && !s.peer }

// replacement makes the supervisor's socket that will take s's place: the
// same type, O_NONBLOCK as s, and s's permission bits.
func (s cmdSocket) replacement() (int, error) {
	typ := s.typ | unix.SOCK_CLOEXEC
	if s.nonblock {
		typ |= unix.SOCK_NONBLOCK
	}
	fd, err := unix.Socket(unix.AF_UNIX, typ, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Fchmod(fd, s.mode&0o777); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// inspectSocket learns descriptor fd of the notifying process, which must
// be a unix socket. path and addr name the call's target in a fact. When ok
// is false, v is the answer: EBADF, ENOTSOCK, or a refusal with a fact when
// the socket is not a unix one or cannot be described.
func (n *Notifier) inspectSocket(req *seccomp.Notif, rule seccomp.Rule, fd int, path, addr string) (s cmdSocket, v verdict, ok bool) {
	if fd < 0 {
		return s, verdict{errno: unix.EBADF}, false
	}
	tid := int(req.Pid)
	magic := "/proc/" + strconv.Itoa(tid) + "/fd/" + strconv.Itoa(fd)
	var st unix.Stat_t
	if err := unix.Stat(magic, &st); err != nil {
		return s, verdict{errno: unix.EBADF}, false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return s, verdict{errno: unix.ENOTSOCK}, false
	}
	fl, err := fdFlags(tid, fd)
	if err != nil || fl&unix.O_PATH != 0 {
		return s, verdict{errno: unix.EBADF}, false // an O_PATH descriptor: the kernel's EBADF
	}
	if !n.sharesNetNS(tid) {
		// sock_diag answers for the supervisor's network namespace only.
		return s, n.unemulated(rule, path, addr, "the sandbox's network namespace cannot be inspected"), false
	}
	d, err := unixDiag(uint32(st.Ino))
	switch {
	case errors.Is(err, unix.ENOENT):
		return s, n.unemulated(rule, path, addr, "only a unix socket can be replaced"), false
	case err != nil:
		return s, n.unemulated(rule, path, addr, "sock_diag cannot describe the socket: "+err.Error()), false
	}
	if !seccomp.Valid(n.fd, req.ID) {
		return s, verdict{abandon: true}, false // what was read may be another process's
	}
	switch d.typ {
	case unix.SOCK_STREAM, unix.SOCK_DGRAM, unix.SOCK_SEQPACKET:
	default:
		return s, n.unemulated(rule, path, addr, "a unix socket of type "+strconv.Itoa(d.typ)+" cannot be replaced"), false
	}
	d.mode = st.Mode & 0o7777
	d.nonblock = fl&unix.O_NONBLOCK != 0
	d.cloexec = fl&unix.O_CLOEXEC != 0
	return d, verdict{}, true
}

// install puts sfd, the fresh replacement of the command's fresh
// descriptor fd, in its place, before the supervisor binds or connects it:
// sfd is then a copy of the command's socket, as pidfd_getfd would have
// given, and a bind or connect that fails, or is abandoned, leaves the
// command a socket as fresh as its own was. ok false: v is the answer — none
// for a notification gone meanwhile, a refusal on a kernel without
// SECCOMP_IOCTL_NOTIF_ADDFD (before 5.9).
func (n *Notifier) install(req *seccomp.Notif, rule seccomp.Rule, sfd, fd int, s cmdSocket, path, addr string) (verdict, bool) {
	err := seccomp.ReplaceFD(n.fd, req.ID, sfd, fd, s.cloexec)
	switch {
	case err == nil:
		return verdict{}, true
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) || errors.Is(err, unix.EINPROGRESS):
		// Gone, interrupted by a signal (the call restarts: a new
		// notification), or answered: no answer.
		return verdict{abandon: true}, false
	case errors.Is(err, unix.EMFILE) || errors.Is(err, unix.EBADF):
		return verdict{errno: err.(unix.Errno)}, false
	}
	return n.unemulated(rule, path, addr, "the kernel cannot install a socket in the command: SECCOMP_IOCTL_NOTIF_ADDFD needs Linux 5.9"), false
}

// connectReplace performs a checked connect (the destination pinned as pin,
// named canon) without pidfd_getfd: on a replacement of a fresh socket.
func (n *Notifier) connectReplace(req *seccomp.Notif, rule seccomp.Rule, fd, pin int, canon string) verdict {
	s, v, ok := n.inspectSocket(req, rule, fd, canon, "")
	if !ok {
		return v
	}
	switch {
	case s.typ != unix.SOCK_DGRAM && s.peer:
		return verdict{errno: unix.EISCONN} // the kernel's answer: nothing happens
	case s.state == tcpListen:
		return verdict{errno: unix.EINVAL}
	case s.bound:
		// Replies would reach the supervisor's socket, and the command's
		// name would be lost.
		return n.unemulated(rule, canon, "", "only a fresh socket can be replaced, and this one is bound")
	case s.peer:
		// A datagram socket connected before: what it received and has
		// not read yet would be lost.
		return n.unemulated(rule, canon, "", "only a fresh socket can be replaced, and this one is connected")
	}
	sfd, err := s.replacement()
	if err != nil {
		return errnoVerdict(err, 0)
	}
	defer unix.Close(sfd)
	if v, ok := n.install(req, rule, sfd, fd, s, canon, ""); !ok {
		return v
	}
	b, err := n.newBlocking(req, sfd)
	if err != nil {
		return errnoVerdict(err, 0)
	}
	return errnoVerdict(b.connect(&unix.SockaddrUnix{Name: "/proc/self/fd/" + strconv.Itoa(pin)}), 0)
}

// datagramSender checks that the command's descriptor fd can send a
// datagram with a destination (canon) from a fresh socket of the
// supervisor's, and returns that socket; ok false: v is the answer.
func (n *Notifier) datagramSender(req *seccomp.Notif, rule seccomp.Rule, fd int, canon string) (sfd int, v verdict, ok bool) {
	s, v, ok := n.inspectSocket(req, rule, fd, canon, "")
	if !ok {
		return -1, v, false
	}
	switch {
	case s.typ == unix.SOCK_STREAM && s.peer:
		return -1, verdict{errno: unix.EISCONN}, false // the kernel's answers: nothing is sent
	case s.typ == unix.SOCK_STREAM:
		return -1, verdict{errno: unix.EOPNOTSUPP}, false
	case s.typ == unix.SOCK_SEQPACKET:
		// The kernel ignores the destination and sends to the peer.
		return -1, n.unemulated(rule, canon, "", "a sequenced-packet socket cannot be sent on for the command"), false
	case s.bound:
		// The receiver would see no sender where the command's name was,
		// and could not answer it.
		return -1, n.unemulated(rule, canon, "", "a bound datagram socket cannot send from another socket"), false
	}
	s.mode = 0o777
	sfd, err := s.replacement()
	if err != nil {
		return -1, errnoVerdict(err, 0), false
	}
	return sfd, verdict{}, true
}

// unconnectedSend answers a sendmsg without a destination on descriptor fd
// without pidfd_getfd: the kernel's ENOTCONN for a socket without a peer,
// else a refusal (the supervisor cannot send on the command's connection).
func (n *Notifier) unconnectedSend(req *seccomp.Notif, rule seccomp.Rule, fd int) verdict {
	s, v, ok := n.inspectSocket(req, rule, fd, "", "")
	if !ok {
		return v
	}
	if !s.peer {
		return verdict{errno: unix.ENOTCONN}
	}
	return n.unemulated(rule, "", "fd "+strconv.Itoa(fd), "sendmsg on a connected socket cannot be performed for the command; send and write can")
}

// unixDiag asks sock_diag (in the supervisor's network namespace) for the
// unix socket of inode ino: its type, state, and whether it has a name and
// a peer. ENOENT: no unix socket has that inode there.
func unixDiag(ino uint32) (cmdSocket, error) {
	const (
		udiagShowName = 1
		udiagShowPeer = 4
		unixDiagName  = 0
		unixDiagPeer  = 2
	)
	msg, attrs, err := unixDiagQuery(ino, [2]uint32{^uint32(0), ^uint32(0)}, udiagShowName|udiagShowPeer)
	if err != nil {
		return cmdSocket{}, err
	}
	s := cmdSocket{typ: int(msg[1]), state: msg[2]}
	err = eachAttr(attrs, func(typ uint16, val []byte) {
		switch typ {
		case unixDiagName:
			s.bound = true
		case unixDiagPeer:
			s.peer = true
		}
	})
	return s, err
}

// unixDiagQuery sends one unix_diag request for the socket of inode ino
// (cookie: ^0, ^0 for any) asking for the attributes show, and returns the
// reply's struct unix_diag_msg (16 bytes) and its attributes. The kernel
// answers while the request is sent, so nothing waits.
func unixDiagQuery(ino uint32, cookie [2]uint32, show uint32) (msg, attrs []byte, err error) {
	nl, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(nl)
	le := binary.LittleEndian
	req := make([]byte, 16+24)
	le.PutUint32(req[0:], uint32(len(req)))
	le.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	le.PutUint16(req[6:], unix.NLM_F_REQUEST)
	le.PutUint32(req[8:], 1)
	req[16] = unix.AF_UNIX
	le.PutUint32(req[20:], ^uint32(0)) // every state
	le.PutUint32(req[24:], ino)
	le.PutUint32(req[28:], show)
	le.PutUint32(req[32:], cookie[0])
	le.PutUint32(req[36:], cookie[1])
	if err := unix.Sendto(nl, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, nil, err
	}
	buf := make([]byte, 4096)
	m, _, err := unix.Recvfrom(nl, buf, unix.MSG_DONTWAIT)
	if err != nil {
		return nil, nil, err
	}
	if m < 16 {
		return nil, nil, unix.EPROTO
	}
	l := int(le.Uint32(buf))
	if l < 16 || l > m {
		return nil, nil, unix.EPROTO
	}
	buf = buf[:l]
	switch le.Uint16(buf[4:]) {
	case unix.NLMSG_ERROR:
		if l < 20 {
			return nil, nil, unix.EPROTO
		}
		if e := -int32(le.Uint32(buf[16:])); e > 0 {
			return nil, nil, unix.Errno(e)
		}
		return nil, nil, unix.EPROTO
	case unix.SOCK_DIAG_BY_FAMILY:
	default:
		return nil, nil, unix.EPROTO
	}
	if l < 32 || buf[16] != unix.AF_UNIX || le.Uint32(buf[20:]) != ino {
		return nil, nil, unix.EPROTO
	}
	return buf[16:32], buf[32:], nil
}

// eachAttr calls f for each netlink attribute in b.
func eachAttr(b []byte, f func(typ uint16, val []byte)) error {
	le := binary.LittleEndian
	for len(b) >= 4 {
		l, typ := int(le.Uint16(b)), le.Uint16(b[2:])
		if l < 4 || l > len(b) {
			return unix.EPROTO
		}
		f(typ, b[4:l])
		b = b[min((l+3)&^3, len(b)):]
	}
	return nil
}

// pidfdSignalByInfo performs pidfd_send_signal(fd, sig, NULL, flags)
// without pidfd_getfd: the command's descriptor fd is judged by its fdinfo
// (a pidfd, and the pid it refers to), and the signal goes through a pidfd
// of the supervisor's own, opened for that pid and checked to refer to the
// same process: the command's descriptor is read again afterwards and must
// still be a pidfd of that pid — a process that died in between shows pid
// -1, and one whose pid was reused has another pidfd. A descriptor the
// command dup2s over fd after the check changes nothing: the supervisor
// never acts on it.
func (n *Notifier) pidfdSignalByInfo(req *seccomp.Notif, rule seccomp.Rule) verdict {
	a := req.Args
	tid, fd := int(req.Pid), int(int32(a[0]))
	named := "fd " + strconv.Itoa(fd)
	pid, thread, ok := cmdPidfd(tid, fd)
	if !ok {
		// Not a pidfd (a /proc/PID directory also works as one): no
		// target the supervisor can vouch for.
		return n.deny(rule, unix.EPERM, "", named)
	}
	if pid <= 0 {
		return verdict{errno: unix.ESRCH} // the process is gone
	}
	flags := 0
	if thread {
		flags = pidfdThread
	}
	own, err := unix.PidfdOpen(pid, flags)
	if err != nil {
		return verdict{errno: unix.ESRCH}
	}
	defer unix.Close(own)
	if again, athread, ok := cmdPidfd(tid, fd); !ok || again != pid || athread != thread {
		return verdict{errno: unix.ESRCH} // gone, or swapped: judge nothing
	}
	if !seccomp.Valid(n.fd, req.ID) {
		return verdict{abandon: true}
	}
	if !n.signalable(pid) {
		return n.deny(rule, unix.EPERM, "", "pid "+strconv.Itoa(pid))
	}
	_, _, e := unix.Syscall6(unix.SYS_PIDFD_SEND_SIGNAL, uintptr(own), uintptr(int32(a[1])), 0, uintptr(uint32(a[3])), 0, 0)
	if e != 0 {
		return verdict{errno: e}
	}
	return verdict{}
}

// cmdPidfd reads descriptor fd of task tid: whether it is a pidfd, the pid
// (in the supervisor's pid namespace) it refers to (-1: the process is
// gone), and whether it is a thread's (PIDFD_THREAD).
func cmdPidfd(tid, fd int) (pid int, thread, ok bool) {
	base := "/proc/" + strconv.Itoa(tid)
	if link, err := os.Readlink(base + "/fd/" + strconv.Itoa(fd)); err != nil || link != "anon_inode:[pidfd]" {
		return 0, false, false
	}
	b, err := os.ReadFile(base + "/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, false, false
	}
	pid, flags, havePid, haveFlags := 0, uint64(0), false, false
	for _, line := range strings.Split(string(b), "\n") {
		if rest, found := strings.CutPrefix(line, "Pid:"); found {
			p, err := strconv.Atoi(strings.TrimSpace(rest))
			pid, havePid = p, err == nil
		}
		if rest, found := strings.CutPrefix(line, "flags:"); found {
			f, err := strconv.ParseUint(strings.TrimSpace(rest), 8, 32)
			flags, haveFlags = f, err == nil
		}
	}
	return pid, flags&pidfdThread != 0, havePid && haveFlags
}

// pidfdThread is PIDFD_THREAD (Linux 6.9): a pidfd of a thread, not of a
// thread group (O_EXCL in its flags).
const pidfdThread = unix.O_EXCL
