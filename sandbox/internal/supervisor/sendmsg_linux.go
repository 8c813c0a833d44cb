//go:build linux

package supervisor

import (
	"encoding/binary"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/resolve"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// sendmsg and sendmmsg carry their destination inside a struct the filter
// cannot look into, and a check followed by a continued call could be raced
// (the target rewrites msg_name in between). So, while the network is off,
// the supervisor performs every sendmsg itself: it reads the message once —
// destination, data, control — checks a destination like connect's, takes
// copies of the socket and of any SCM_RIGHTS fds with pidfd_getfd, and sends.
// What the kernel then acts on is only what the supervisor read and checked.
// Without pidfd_getfd (replace_linux.go) it can send only a datagram with a
// destination, without control data, from an unbound socket: from a fresh
// socket of its own; the rest is refused with a fact.

// Limits on what one emulated message may carry.
const (
	maxIovecs  = 1024
	maxControl = 64 << 10
)

// msghdr field offsets (struct msghdr on 64-bit Linux, 56 bytes).
const (
	msghdrSize    = 56
	mmsghdrSize   = 64
	offName       = 0
	offNamelen    = 8
	offIov        = 16
	offIovlen     = 24
	offControl    = 32
	offControllen = 40
)

func (n *Notifier) sendmsg(req *seccomp.Notif, rule seccomp.Rule) verdict {
	a := req.Args
	sent, v, ok := n.sendOne(req, rule, int(int32(a[0])), a[1], int(int32(a[2])), true)
	if !ok {
		return v
	}
	return verdict{val: uint64(sent)}
}

// sendmmsg sends the vector one message at a time, writing each msg_len back
// into the target, and returns how many were sent, like the kernel. Only the
// first message may wait for room: after it, a full socket ends the call.
func (n *Notifier) sendmmsg(req *seccomp.Notif, rule seccomp.Rule) verdict {
	a := req.Args
	vec, vlen, flags := a[1], int(uint32(a[2])), int(int32(a[3]))
	if vlen > 1024 {
		vlen = 1024
	}
	done := 0
	for i := 0; i < vlen; i++ {
		hdr := vec + uint64(i*mmsghdrSize)
		sent, v, ok := n.sendOne(req, rule, int(int32(a[0])), hdr, flags, i == 0)
		if !ok {
			if done == 0 {
				return v
			}
			break
		}
		var buf [4]byte
		binary.LittleEndian.PutUint32(buf[:], uint32(sent))
		if err := writeBytes(int(req.Pid), hdr+msghdrSize, buf[:]); err != nil {
			break
		}
		done++
	}
	return verdict{val: uint64(done)}
}

// sendOne performs one struct msghdr at hdr for the target; mayWait: see
// blocking.send.
func (n *Notifier) sendOne(req *seccomp.Notif, rule seccomp.Rule, sockfd int, hdr uint64, flags int, mayWait bool) (int, verdict, bool) {
	pid := int(req.Pid)
	h, err := resolve.ReadBytes(pid, hdr, msghdrSize)
	if err != nil {
		return 0, verdict{errno: unix.EFAULT}, false
	}
	le := binary.LittleEndian
	name, namelen := le.Uint64(h[offName:]), int(le.Uint32(h[offNamelen:]))
	iov, iovlen := le.Uint64(h[offIov:]), int(le.Uint64(h[offIovlen:]))
	ctl, ctllen := le.Uint64(h[offControl:]), int(le.Uint64(h[offControllen:]))
	if iovlen < 0 || iovlen > maxIovecs || ctllen < 0 || ctllen > maxControl {
		return 0, verdict{errno: unix.EMSGSIZE}, false
	}

	var msg unix.Msghdr
	var sa unix.RawSockaddrUnix
	dest := false
	canon := ""
	inet, iv, iok := n.sendmsgInet(req, rule, name, namelen)
	if !iok {
		return 0, iv, false
	}
	if inet.name != nil {
		msg.Name = &inet.name[0]
		msg.Namelen = uint32(len(inet.name))
	} else if name != 0 && namelen > 0 {
		pin, c, v, ok := n.destination(req, rule, name, namelen)
		if !ok {
			return 0, v, false
		}
		defer unix.Close(pin)
		dest, canon = true, c
		sa.Family = unix.AF_UNIX
		path := "/proc/self/fd/" + strconv.Itoa(pin)
		for i := 0; i < len(path); i++ {
			sa.Path[i] = int8(path[i])
		}
		msg.Name = (*byte)(unsafe.Pointer(&sa))
		msg.Namelen = uint32(2 + len(path) + 1)
	}

	var data []byte
	if iovlen > 0 {
		vecs, err := resolve.ReadBytes(pid, iov, iovlen*16)
		if err != nil {
			return 0, verdict{errno: unix.EFAULT}, false
		}
		for i := 0; i < iovlen; i++ {
			base, l := le.Uint64(vecs[i*16:]), int(le.Uint64(vecs[i*16+8:]))
			if l == 0 {
				continue
			}
			if l < 0 || len(data)+l > maxDatagram {
				return 0, verdict{errno: unix.EMSGSIZE}, false
			}
			b, err := resolve.ReadBytes(pid, base, l)
			if err != nil {
				return 0, verdict{errno: unix.EFAULT}, false
			}
			data = append(data, b...)
		}
	}

	var oob []byte
	var cmsgs []unix.SocketControlMessage
	var passed []int
	defer func() {
		for _, fd := range passed {
			unix.Close(fd)
		}
	}()
	if ctl != 0 && ctllen > 0 {
		raw, err := resolve.ReadBytes(pid, ctl, ctllen)
		if err != nil {
			return 0, verdict{errno: unix.EFAULT}, false
		}
		cmsgs, err = unix.ParseSocketControlMessage(raw)
		if err != nil {
			return 0, verdict{errno: unix.EINVAL}, false
		}
		if n.nocopy && len(cmsgs) > 0 {
			// SCM_RIGHTS would need copies of the descriptors, and
			// SCM_CREDENTIALS naming the command's pid fails from the
			// supervisor's socket.
			return 0, n.unemulated(rule, canon, "", "control data, SCM_RIGHTS or SCM_CREDENTIALS, cannot be passed on for the command"), false
		}
		for _, c := range cmsgs {
			if c.Header.Level == unix.SOL_SOCKET && c.Header.Type == unix.SCM_RIGHTS {
				var fds []int
				for i := 0; i+4 <= len(c.Data); i += 4 {
					fd, v, ok := targetFD(pid, int(int32(le.Uint32(c.Data[i:]))), n.pending(req))
					if !ok {
						return 0, v, false
					}
					passed = append(passed, fd)
					fds = append(fds, fd)
				}
				oob = append(oob, unix.UnixRights(fds...)...)
				continue
			}
			oob = append(oob, cmsg(c.Header.Level, c.Header.Type, c.Data)...)
		}
	}

	var sfd int
	var v verdict
	var ok bool
	switch {
	case !n.nocopy:
		sfd, v, ok = targetFD(pid, sockfd, n.pending(req))
	case inet.name != nil:
		return 0, n.unemulated(rule, "", inet.dest.String(), "an inet datagram cannot be sent for the command"), false
	case dest:
		sfd, v, ok = n.datagramSender(req, rule, sockfd, canon)
	default:
		return 0, n.unconnectedSend(req, rule, sockfd), false
	}
	if !ok {
		return 0, v, false
	}
	defer unix.Close(sfd)
	if len(cmsgs) > 0 {
		if dom, _ := unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_DOMAIN); (dom == unix.AF_INET || dom == unix.AF_INET6) && !inetControlOK(cmsgs) {
			// Sent from the supervisor's thread, IP options (a source
			// route) would carry its capabilities (CAP_NET_RAW as root),
			// and a chosen source address (IP_PKTINFO) could leave the
			// loopback: only what any sender may set is passed on.
			addr := ""
			if inet.name != nil {
				addr = inet.dest.String()
			}
			v := n.deny(rule, unix.EACCES, "", addr)
			v.fact.Reason = reasonInetControl
			return 0, v, false
		}
	}
	if inet.name != nil && n.emulated() {
		name, v, ok := n.ownName(rule, sfd, inet.dest)
		if !ok {
			return 0, v, false
		}
		msg.Name, msg.Namelen = &name[0], uint32(len(name))
	} else if inet.name != nil && inet.dest.Addr().IsLoopback() {
		if typ, _ := unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_TYPE); typ == unix.SOCK_DGRAM && hostOnly(pid, "udp", inet.dest.Port()) {
			v := n.deny(rule, unix.ECONNREFUSED, "", inet.dest.String())
			v.fact.Reason = reasonOwnLoopback
			return 0, v, false
		}
	}
	var iovec unix.Iovec
	if len(data) > 0 {
		iovec.Base = &data[0]
		iovec.SetLen(len(data))
		msg.Iov = &iovec
		msg.SetIovlen(1)
	}
	if len(oob) > 0 {
		msg.Control = &oob[0]
		msg.SetControllen(len(oob))
	}
	b, err := n.newBlocking(req, sfd)
	if err != nil {
		return 0, errnoVerdict(err, 0), false
	}
	r, err := b.send(flags, mayWait, func(flags int) (int, error) {
		r, _, e := unix.Syscall(unix.SYS_SENDMSG, uintptr(sfd), uintptr(unsafe.Pointer(&msg)), uintptr(flags))
		if e != 0 {
			return 0, e
		}
		return int(r), nil
	})
	if err != nil {
		if err == unix.EPIPE && flags&unix.MSG_NOSIGNAL == 0 {
			// The kernel would have raised SIGPIPE in the sender.
			unix.Tgkill(resolve.Tgid(pid), pid, unix.SIGPIPE)
		}
		return 0, errnoVerdict(err, 0), false
	}
	return r, verdict{}, true
}

// reasonInetControl is the reason of a refused sendmsg on an inet socket
// whose control data the supervisor does not pass on.
const reasonInetControl = "control data other than UDP_SEGMENT, IP_TOS, IP_TTL, IPV6_TCLASS and IPV6_HOPLIMIT cannot be sent for the command"

// inetControlOK says whether every control message of a sendmsg on an
// inet socket is one any unprivileged sender may set and that keeps the
// datagram's route: GSO segments, the TOS or traffic class, the TTL or hop
// limit.
func inetControlOK(cmsgs []unix.SocketControlMessage) bool {
	for _, c := range cmsgs {
		switch {
		case c.Header.Level == unix.SOL_UDP && c.Header.Type == unix.UDP_SEGMENT,
			c.Header.Level == unix.IPPROTO_IP && (c.Header.Type == unix.IP_TOS || c.Header.Type == unix.IP_TTL),
			c.Header.Level == unix.IPPROTO_IPV6 && (c.Header.Type == unix.IPV6_TCLASS || c.Header.Type == unix.IPV6_HOPLIMIT):
		default:
			return false
		}
	}
	return true
}

// cmsg encodes one control message.
func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

// writeBytes writes b into the target's memory at addr.
func writeBytes(pid int, addr uint64, b []byte) error {
	_, err := unix.ProcessVMWritev(pid, []unix.Iovec{{Base: &b[0], Len: uint64(len(b))}},
		[]unix.RemoteIovec{{Base: uintptr(addr), Len: len(b)}}, 0)
	return err
}
