//go:build linux

package supervisor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/resolve"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// connect decides a connect() made while the network is off. Only pathname
// unix sockets inside the writable roots that the sandbox bound may be
// reached, and the supervisor
// connects the target's socket itself: it takes a copy of the socket with
// pidfd_getfd (without it: connects a replacement, replace_linux.go), pins
// the checked socket file with an O_PATH open that refuses symlinks, and
// connects through /proc/self/fd. The target's memory is read once;
// changing it afterwards changes nothing. On kernels without Landlock ABI 9
// this is what keeps docker.sock, D-Bus and ssh-agent out of reach.
func (n *Notifier) connect(req *seccomp.Notif, rule seccomp.Rule) verdict {
	a := req.Args
	if n.egress != nil {
		if v, handled := n.connectInet(req, rule); handled {
			return v
		}
	}
	pin, canon, v, ok := n.destination(req, rule, a[1], int(uint32(a[2])))
	if !ok {
		return v
	}
	defer unix.Close(pin)
	if n.nocopy {
		return n.connectReplace(req, rule, int(int32(a[0])), pin, canon)
	}
	sfd, v, ok := targetFD(int(req.Pid), int(int32(a[0])), n.pending(req))
	if !ok {
		return v
	}
	defer unix.Close(sfd)
	b, err := n.newBlocking(req, sfd)
	if err != nil {
		return errnoVerdict(err, 0)
	}
	return errnoVerdict(b.connect(&unix.SockaddrUnix{Name: "/proc/self/fd/" + strconv.Itoa(pin)}), 0)
}

// sendto decides a sendto() with a destination address (a datagram to a
// socket path, e.g. /dev/log): the same check as connect, and the supervisor
// sends the bytes it read once from the target, to the pinned socket — from
// its copy of the command's socket, or without pidfd_getfd from a fresh
// socket of its own (replace_linux.go).
func (n *Notifier) sendto(req *seccomp.Notif, rule seccomp.Rule) verdict {
	a := req.Args
	if n.egress != nil {
		if v, handled := n.sendtoInet(req, rule); handled {
			return v
		}
	}
	pin, canon, v, ok := n.destination(req, rule, a[4], int(uint32(a[5])))
	if !ok {
		return v
	}
	defer unix.Close(pin)
	data, v, ok := sendtoData(req)
	if !ok {
		return v
	}
	var sfd int
	if n.nocopy {
		sfd, v, ok = n.datagramSender(req, rule, int(int32(a[0])), canon)
	} else {
		sfd, v, ok = targetFD(int(req.Pid), int(int32(a[0])), n.pending(req))
	}
	if !ok {
		return v
	}
	defer unix.Close(sfd)
	b, err := n.newBlocking(req, sfd)
	if err != nil {
		return errnoVerdict(err, 0)
	}
	to := &unix.SockaddrUnix{Name: "/proc/self/fd/" + strconv.Itoa(pin)}
	sent, err := b.send(int(int32(a[3])), true, func(flags int) (int, error) {
		return unix.SendmsgN(sfd, data, nil, to, flags)
	})
	return errnoVerdict(err, uint64(sent))
}

// maxDatagram bounds what the supervisor copies for one emulated sendto.
const maxDatagram = 4 << 20

// sendtoData reads a sendto's buffer (arguments 1 and 2) from the target
// once; ok false: v is the answer (EMSGSIZE past maxDatagram, EFAULT).
func sendtoData(req *seccomp.Notif) (data []byte, v verdict, ok bool) {
	size := int(req.Args[2])
	if size < 0 || size > maxDatagram {
		return nil, verdict{errno: unix.EMSGSIZE}, false
	}
	if size == 0 {
		return nil, verdict{}, true
	}
	data, err := resolve.ReadBytes(int(req.Pid), req.Args[1], size)
	if err != nil {
		return nil, verdict{errno: unix.EFAULT}, false
	}
	return data, verdict{}, true
}

// destination reads a socket address from the target and checks it: only a
// pathname unix socket inside the writable roots passes, and then its socket
// file is returned pinned (an O_PATH fd), with its canonical path. Otherwise
// ok is false and v is the answer (a denial with a fact for a forbidden
// destination).
func (n *Notifier) destination(req *seccomp.Notif, rule seccomp.Rule, addr uint64, alen int) (pin int, canon string, v verdict, ok bool) {
	pid := int(req.Pid)
	if alen < 2 || alen > 128 {
		return -1, "", verdict{errno: unix.EINVAL}, false
	}
	b, err := resolve.ReadBytes(pid, addr, alen)
	if err != nil {
		return -1, "", verdict{errno: unix.EFAULT}, false
	}
	switch fam := binary.LittleEndian.Uint16(b); fam {
	case unix.AF_UNIX:
	case unix.AF_INET, unix.AF_INET6:
		return -1, "", n.deny(rule, unix.EACCES, "", inetAddress(b)), false
	default:
		return -1, "", verdict{errno: unix.EINVAL}, false
	}
	name := b[2:]
	if len(name) == 0 {
		return -1, "", verdict{errno: unix.EINVAL}, false
	}
	if name[0] == 0 {
		// Abstract sockets live in the host's (or the sandbox's empty)
		// network namespace; none may be reached without network.
		return -1, "", n.deny(rule, unix.EPERM, "", abstractName(name[1:])), false
	}
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	t, err := n.target(req)
	if err != nil {
		return -1, "", verdict{errno: unix.EACCES}, false
	}
	canon, err = t.Resolve(unix.AT_FDCWD, string(name), true)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return -1, "", verdict{errno: err.(unix.Errno)}, false
		}
		return -1, "", n.deny(rule, unix.EACCES, string(name), ""), false
	}
	var st unix.Stat_t
	if err := unix.Fstatat(t.RootFD, resolve.Rel(canon), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		// No such socket: an ordinary failure, not a denial.
		return -1, "", errnoVerdict(err, 0), false
	}
	if modes.Within(canon, "/proc") {
		return -1, "", n.deny(rule, unix.EACCES, canon, ""), false
	}
	if !n.policy.Writable(canon) {
		return -1, "", n.hostSocket(rule, canon, &st), false
	}
	pin, err = unix.Openat2(t.RootFD, resolve.Rel(canon), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return -1, "", verdict{errno: unix.ENOENT}, false
		}
		return -1, "", verdict{errno: unix.EACCES}, false // a symlink appeared after the check
	}
	if err := unix.Fstat(pin, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		unix.Close(pin)
		return -1, "", verdict{errno: unix.ECONNREFUSED}, false
	}
	if !n.own.has(&st) {
		// A socket the sandbox did not bind during this run: a host
		// listener in a writable root (an ssh-agent under /tmp), under its
		// own name, a hard link or a renamed one (bind_linux.go).
		unix.Close(pin)
		return -1, "", n.hostSocket(rule, canon, &st), false
	}
	return pin, canon, verdict{}, true
}

// hostSocket refuses a destination that is not the sandbox's own socket:
// a denial (EACCES) when something is bound to it, else the kernel's
// ECONNREFUSED of a stale socket file (a daemon's, left by an earlier
// run), which is not a denial: a tool that restarts its daemon on
// ECONNREFUSED does so. It fails closed: unsure is a denial.
func (n *Notifier) hostSocket(rule seccomp.Rule, canon string, st *unix.Stat_t) verdict {
	if st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		if bound, err := boundAt(st); err == nil && !bound {
			return verdict{errno: unix.ECONNREFUSED}
		}
	}
	return n.deny(rule, unix.EACCES, canon, "")
}

// targetFD takes a copy of fd from the process of thread tid with
// pidfd_getfd. still, when not nil, must report that the process is still
// the one that made the notification: it is asked after the pidfd is open,
// so a pid reused in between (the target died) can never hand us another
// process's descriptor. Never called on a host without pidfd_getfd
// (Notifier.nocopy), where the calls that need a copy replace the socket
// or are refused.
func targetFD(tid, fd int, still func() bool) (int, verdict, bool) {
	pidfd, err := unix.PidfdOpen(resolve.Tgid(tid), 0)
	if err != nil {
		return -1, verdict{errno: unix.EACCES}, false
	}
	defer unix.Close(pidfd)
	if still != nil && !still() {
		return -1, verdict{errno: unix.ESRCH}, false
	}
	sfd, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		if errors.Is(err, unix.EBADF) {
			return -1, verdict{errno: unix.EBADF}, false
		}
		return -1, verdict{errno: unix.EACCES}, false
	}
	return sfd, verdict{}, true
}

// pending returns a check that req is still waiting for its answer.
func (n *Notifier) pending(req *seccomp.Notif) func() bool {
	return func() bool { return seccomp.Valid(n.fd, req.ID) }
}

// errnoVerdict answers with err's errno, or success with val; an abandoned
// call gets no answer.
func errnoVerdict(err error, val uint64) verdict {
	if err == nil {
		return verdict{val: val}
	}
	if errors.Is(err, errAbandoned) {
		return verdict{abandon: true}
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return verdict{errno: e}
	}
	return verdict{errno: unix.EIO}
}

// inetAddress renders a sockaddr_in/sockaddr_in6 as "ip:port".
func inetAddress(b []byte) string {
	fam := binary.LittleEndian.Uint16(b)
	switch {
	case fam == unix.AF_INET && len(b) >= 8:
		ip := netip.AddrFrom4([4]byte(b[4:8]))
		return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:4])).String()
	case fam == unix.AF_INET6 && len(b) >= 24:
		ip := netip.AddrFrom16([16]byte(b[8:24]))
		return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:4])).String()
	}
	return fmt.Sprintf("family %d", fam)
}

// boundAt says whether a unix socket of the supervisor's network namespace
// is bound to the socket file st, by its inode number (unix_diag's
// UDIAG_SHOW_VFS): a socket file nothing is bound to is a stale one, where
// the kernel answers connect and sendto with ECONNREFUSED. Only the inode
// number is compared, 32 bits of it as unix_diag keeps them: on overlayfs
// (a container's root, the VM guest's) stat gives the overlay's device but
// the socket is bound to the upper layer's inode, whose number it keeps. A
// match on another filesystem reads as bound: a denial, never the other
// way. A socket bound in another network namespace is not seen (the caller
// answers ECONNREFUSED, still a refusal). An error means it cannot tell.
func boundAt(st *unix.Stat_t) (bool, error) {
	const (
		udiagShowVFS = 2
		unixDiagVFS  = 1
	)
	nl, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return false, err
	}
	defer unix.Close(nl)
	// The kernel answers a dump at once; the bound is for a kernel that
	// would not: the supervisor never waits on the command's behalf.
	if err := unix.SetsockoptTimeval(nl, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 1}); err != nil {
		return false, err
	}
	le := binary.LittleEndian
	req := make([]byte, 16+24)
	le.PutUint32(req[0:], uint32(len(req)))
	le.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	le.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	le.PutUint32(req[8:], 1)
	req[16] = unix.AF_UNIX
	le.PutUint32(req[20:], ^uint32(0)) // every state
	le.PutUint32(req[28:], udiagShowVFS)
	le.PutUint32(req[32:], ^uint32(0))
	le.PutUint32(req[36:], ^uint32(0))
	if err := unix.Sendto(nl, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false, err
	}
	buf := make([]byte, 32<<10)
	for {
		m, _, err := unix.Recvfrom(nl, buf, 0)
		if err != nil {
			return false, err
		}
		for b := buf[:m]; len(b) >= 16; {
			l := int(le.Uint32(b))
			if l < 16 || l > len(b) {
				return false, unix.EPROTO
			}
			switch le.Uint16(b[4:]) {
			case unix.NLMSG_DONE:
				return false, nil
			case unix.NLMSG_ERROR:
				return false, unix.EPROTO
			case unix.SOCK_DIAG_BY_FAMILY:
				if l < 32 {
					return false, unix.EPROTO
				}
				found := false
				if err := eachAttr(b[32:l], func(typ uint16, val []byte) {
					if typ == unixDiagVFS && len(val) >= 8 && le.Uint32(val) == uint32(st.Ino) {
						found = true
					}
				}); err != nil {
					return false, err
				}
				if found {
					return true, nil
				}
			}
			b = b[min((l+3)&^3, len(b)):]
		}
	}
}
