//go:build linux

package supervisor

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/resolve"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// A loopback of the command's own without a net namespace. With the
// network off (with or without an allowlist), a command that got no net
// namespace (a host without user namespaces, Ubuntu 24.04's AppArmor
// restriction) shares the host's loopback. Its servers (httptest, a test database, a
// dev server polled with curl) still work, on an address of its own: the
// supervisor picks one at random in 127.64.0.0/10 (all of 127.0.0.0/8 is
// the loopback's; 127.0.0.1, 127.0.0.53 and 127.0.1.1 lie outside) and
// performs every inet bind, listen, connect and send of the command:
//
//   - A bind of a loopback or unspecified address (127.0.0.1, ::1, 0.0.0.0,
//     ::) binds the own address instead, at the port asked for, on the
//     supervisor's copy of the socket, SO_REUSEPORT cleared first (and
//     SO_REUSEADDR for UDP): no socket of the host shares that port with
//     it, and a host client, which connects to 127.0.0.1 or localhost,
//     never reaches it (no port squatting). Any other address is refused
//     (EADDRNOTAVAIL, a fact). An IPv6 socket gets the own address mapped
//     (::ffff:127.x.y.z); an IPv6-only one cannot: it may bind an ephemeral
//     port of ::1 (Go probes IPv6 so), never listen there, and any other
//     bind of it is refused.
//   - listen() of an unbound socket binds it there first (the kernel would
//     bind it to every interface of the host).
//   - connect() and a datagram's destination on a loopback address (but
//     the egress proxy's and an allowlist's loopback hosts') reach
//     the own address at that port, and only while a socket listens (TCP)
//     or is bound (UDP) there, read from /proc/net at that moment: the own
//     address's sockets are the command's. Else ECONNREFUSED, with a fact
//     when a host socket has the port (the sandbox's doing).
//   - getsockname() shows the own address as 127.0.0.1 (a server printing
//     its URL, or looking its name up, as Python's http.server does, sees
//     the loopback it asked for); the addresses of peers (accept,
//     getpeername, recvfrom) stay the own address.
//
// Docker's default profile refuses pidfd_getfd: an inet socket cannot be
// bound for the command there (sock_diag shows no unbound inet socket, so
// a replacement cannot be checked to be fresh), and inet sockets stay
// refused.

// ownLoopbackNet is where the own address is picked.
var ownLoopbackNet = netip.MustParsePrefix("127.64.0.0/10")

// newOwnLoopback picks a command's own loopback address.
func newOwnLoopback() netip.Addr {
	var b [4]byte
	rand.Read(b[:]) // never fails (Go 1.24)
	base := ownLoopbackNet.Addr().As4()
	v := binary.BigEndian.Uint32(base[:]) | binary.BigEndian.Uint32(b[:])&(1<<(32-ownLoopbackNet.Bits())-1)
	if v&0xff == 0 || v&0xff == 0xff {
		v ^= 1 // neither .0 nor .255, which some tools take for a network
	}
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// emulated says whether the command's loopback is emulated on the host's
// (no net namespace, network off, no allowlist, copies of its sockets).
func (n *Notifier) emulated() bool {
	return n.egress != nil && n.egress.own.IsValid() && !n.nocopy
}

// loopbackDest says whether dest names the loopback (or the own address):
// an address of 127.0.0.0/8, ::1, a v4-mapped loopback, or the unspecified
// address (the kernel connects that to the local host).
func loopbackDest(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsUnspecified()
}

// reasonOwnIPv6 is the reason of a refused bind of an IPv6-only socket.
const reasonOwnIPv6 = "without a net namespace the sandbox's own loopback is IPv4 only (an IPv6-only socket cannot have it)"

// bindOwn performs an inet bind for the command on its own loopback
// address.
func (n *Notifier) bindOwn(req *seccomp.Notif, rule seccomp.Rule, sock boundSocket, addr []byte) verdict {
	ap, ok := sockaddrInet(addr)
	if !ok || sock.dom != int(binary.LittleEndian.Uint16(addr)) {
		return verdict{errno: unix.EINVAL}
	}
	if !loopbackDest(ap.Addr()) {
		v := n.deny(rule, unix.EADDRNOTAVAIL, "", netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String())
		v.fact.Reason = n.egress.reason()
		return v
	}
	to, v, ok := n.ownAddress(rule, sock.fd, sock.dom, ap.Port())
	if !ok {
		return v
	}
	v, _ = n.bindOn(req, rule, sock, -1, to, 0o077, "", "")
	return v
}

// ownAddress prepares socket fd (of family dom) to be bound on the own
// address at port, and returns that address as the kernel takes it.
func (n *Notifier) ownAddress(rule seccomp.Rule, fd, dom int, port uint16) ([]byte, verdict, bool) {
	if dom == unix.AF_INET6 {
		only, err := unix.GetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY)
		switch {
		case err != nil:
			return nil, errnoVerdict(err, 0), false
		case only != 0 && port == 0:
			// An ephemeral port of ::1 (Go probes IPv6 so): no host client
			// expects it, and it is never the command's to listen on
			// (listenOwn) or to reach (ownDestination).
			return rawInet(unix.AF_INET6, netip.AddrPortFrom(netip.IPv6Loopback(), 0)), verdict{}, true
		case only != 0:
			v := n.deny(rule, unix.EADDRNOTAVAIL, "", netip.AddrPortFrom(netip.IPv6Loopback(), port).String())
			v.fact.Reason = reasonOwnIPv6
			return nil, v, false
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 0); err != nil {
		return nil, errnoVerdict(err, 0), false
	}
	if typ, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); typ != unix.SOCK_STREAM {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 0); err != nil {
			return nil, errnoVerdict(err, 0), false
		}
	}
	return rawInet(uint16(dom), netip.AddrPortFrom(n.egress.own, port)), verdict{}, true
}

// rawInet is dest as a struct sockaddr_in (fam AF_INET) or sockaddr_in6
// (an IPv4 address mapped).
func rawInet(fam uint16, dest netip.AddrPort) []byte {
	if fam == unix.AF_INET {
		b := make([]byte, unix.SizeofSockaddrInet4)
		binary.LittleEndian.PutUint16(b, unix.AF_INET)
		binary.BigEndian.PutUint16(b[2:], dest.Port())
		a := dest.Addr().Unmap().As4()
		copy(b[4:], a[:])
		return b
	}
	b := make([]byte, unix.SizeofSockaddrInet6)
	binary.LittleEndian.PutUint16(b, unix.AF_INET6)
	binary.BigEndian.PutUint16(b[2:], dest.Port())
	a := dest.Addr().As16()
	copy(b[8:], a[:])
	return b
}

// listenOwn performs listen() for the command on inet socket sfd: bound to
// the own address first when unbound; a socket bound anywhere else (which
// bindOwn never does) is refused.
func (n *Notifier) listenOwn(rule seccomp.Rule, sfd, backlog int) verdict {
	local, v, ok := n.bindUnbound(rule, sfd)
	if !ok {
		return v
	}
	if local.Addr() != n.egress.own {
		v := n.deny(rule, unix.EACCES, "", local.String())
		v.fact.Reason = n.egress.reason()
		return v
	}
	return errnoVerdict(unix.Listen(sfd, backlog), 0)
}

// bindUnbound binds inet socket sfd to the own address at an ephemeral
// port when it is unbound (the kernel would bind it to every interface of
// the host for a listen or a datagram sent), and returns where it is bound.
func (n *Notifier) bindUnbound(rule seccomp.Rule, sfd int) (netip.AddrPort, verdict, bool) {
	sa, err := unix.Getsockname(sfd)
	if err != nil {
		return netip.AddrPort{}, errnoVerdict(err, 0), false
	}
	local, ok := sockaddrAddrPort(sa)
	if !ok {
		return netip.AddrPort{}, verdict{errno: unix.EINVAL}, false
	}
	if local.Port() != 0 {
		return local, verdict{}, true
	}
	dom, err := unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return netip.AddrPort{}, errnoVerdict(err, 0), false
	}
	to, v, ok := n.ownAddress(rule, sfd, dom, 0)
	if !ok {
		return netip.AddrPort{}, v, false
	}
	if err := n.restrictedBind(sfd, -1, to, 0o077); err != nil {
		return netip.AddrPort{}, errnoVerdict(err, 0), false
	}
	if sa, err = unix.Getsockname(sfd); err != nil {
		return netip.AddrPort{}, errnoVerdict(err, 0), false
	}
	local, _ = sockaddrAddrPort(sa)
	return local, verdict{}, true
}

// ownRoute maps dest, a destination of the command's inet socket sfd (its
// supervisor's copy, of family dom), to the own loopback address, binding
// the socket there first when it is unbound. ok false: v answers.
func (n *Notifier) ownRoute(rule seccomp.Rule, sfd, dom int, dest netip.AddrPort) (unix.Sockaddr, verdict, bool) {
	if dom != unix.AF_INET && dom != unix.AF_INET6 {
		return nil, verdict{errno: unix.EINVAL}, false // no longer the inet socket the address was for
	}
	to, v, ok := n.ownDestination(rule, socketProto(sfd), dest)
	if !ok {
		return nil, v, false
	}
	if _, v, ok := n.bindUnbound(rule, sfd); !ok {
		return nil, v, false
	}
	return inetSockaddr(uint16(dom), to), verdict{}, true
}

// connectOwn performs an inet connect for the command to dest on its own
// loopback address.
func (n *Notifier) connectOwn(req *seccomp.Notif, rule seccomp.Rule, fd int, dest netip.AddrPort) verdict {
	sfd, dom, v, ok := n.targetSocket(req, fd)
	if !ok {
		return v
	}
	defer unix.Close(sfd)
	to, v, ok := n.ownRoute(rule, sfd, dom, dest)
	if !ok {
		return v
	}
	bl, err := n.newBlocking(req, sfd)
	if err != nil {
		return errnoVerdict(err, 0)
	}
	return errnoVerdict(bl.connect(to), 0)
}

// sendtoOwn performs a sendto with an inet destination for the command,
// to its own loopback address.
func (n *Notifier) sendtoOwn(req *seccomp.Notif, rule seccomp.Rule, dest netip.AddrPort) verdict {
	a := req.Args
	sfd, dom, v, ok := n.targetSocket(req, int(int32(a[0])))
	if !ok {
		return v
	}
	defer unix.Close(sfd)
	to, v, ok := n.ownRoute(rule, sfd, dom, dest)
	if !ok {
		return v
	}
	data, v, ok := sendtoData(req)
	if !ok {
		return v
	}
	bl, err := n.newBlocking(req, sfd)
	if err != nil {
		return errnoVerdict(err, 0)
	}
	sent, err := bl.send(int(int32(a[3])), true, func(flags int) (int, error) {
		return unix.SendmsgN(sfd, data, nil, to, flags)
	})
	return errnoVerdict(err, uint64(sent))
}

// ownName is the destination of a sendmsg on inet socket sfd (the
// command's dest) as the kernel takes it, on the own loopback address.
func (n *Notifier) ownName(rule seccomp.Rule, sfd int, dest netip.AddrPort) ([]byte, verdict, bool) {
	dom, err := unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return nil, errnoVerdict(err, 0), false
	}
	to, v, ok := n.ownRoute(rule, sfd, dom, dest)
	if !ok {
		return nil, v, false
	}
	ap, _ := sockaddrAddrPort(to)
	return rawInet(uint16(dom), ap), verdict{}, true
}

// reasonOwnProto is the reason of a refused destination of an inet
// socket neither TCP nor UDP on the own loopback.
const reasonOwnProto = "only TCP and UDP reach the sandbox's own loopback without a net namespace"

// socketProto is "tcp" or "udp" for such a socket, else "".
func socketProto(sfd int) string {
	p, err := unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	switch {
	case err != nil:
		return ""
	case p == unix.IPPROTO_TCP:
		return "tcp"
	case p == unix.IPPROTO_UDP:
		return "udp"
	}
	return ""
}

// sockaddrAddrPort is an inet socket address as an AddrPort (v4-mapped
// addresses unmapped).
func sockaddrAddrPort(sa unix.Sockaddr) (netip.AddrPort, bool) {
	switch s := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(s.Addr), uint16(s.Port)), true
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(s.Addr).Unmap(), uint16(s.Port)), true
	}
	return netip.AddrPort{}, false
}

// ownDestination maps a loopback destination of protocol proto ("tcp",
// "udp") to the own address, when a socket of the command's is there
// (listening, for TCP). ok false: v answers (refused, or nothing there).
func (n *Notifier) ownDestination(rule seccomp.Rule, proto string, dest netip.AddrPort) (netip.AddrPort, verdict, bool) {
	if !loopbackDest(dest.Addr()) {
		v := n.deny(rule, unix.EACCES, "", dest.String())
		v.fact.Reason = n.egress.reason()
		return netip.AddrPort{}, v, false
	}
	if proto == "" {
		// SCTP, UDP-Lite, ICMP: tables of their own, not checked here.
		v := n.deny(rule, unix.EACCES, "", dest.String())
		v.fact.Reason = reasonOwnProto
		return netip.AddrPort{}, v, false
	}
	to := netip.AddrPortFrom(n.egress.own, dest.Port())
	state := ""
	if proto == "tcp" {
		state = "0A" // LISTEN
	}
	t := readSockets("/proc/net", proto) // the command's namespace: the supervisor's
	if t.has(ownLocals(to), state) && !t.has(wildcardLocals(dest.Port()), state) {
		// The command's socket is there, and no socket of every address
		// shares the port (which one of the command's could only with
		// SO_REUSEADDR or SO_REUSEPORT set back while the supervisor
		// bound it): what reaches the own address is the command's.
		return to, verdict{}, true
	}
	if t.hasPort(dest.Port(), state) {
		// Nothing of the command's is there; a host socket is, out of
		// reach: the sandbox's doing.
		v := n.deny(rule, unix.ECONNREFUSED, "", dest.String())
		v.fact.Reason = reasonOwnLoopback
		return netip.AddrPort{}, v, false
	}
	return netip.AddrPort{}, verdict{errno: unix.ECONNREFUSED}, false
}

// sockets are the local addresses and states of the sockets of one
// protocol ("tcp", "udp": its IPv4 and IPv6 tables) in a network namespace,
// read once from its /proc/.../net directory dir: as the kernel prints
// them, "0100007F:1F90" and "0A" (LISTEN).
type sockets []struct{ local, state string }

func readSockets(dir, proto string) sockets {
	var t sockets
	for _, f := range []string{proto, proto + "6"} {
		b, err := os.ReadFile(dir + "/" + f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st ...
			if fields := strings.Fields(line); len(fields) > 3 {
				t = append(t, struct{ local, state string }{fields[1], fields[3]})
			}
		}
	}
	return t
}

// has says whether a socket is bound to one of locals, in state state
// ("" for any).
func (t sockets) has(locals []string, state string) bool {
	for _, s := range t {
		if slices.Contains(locals, s.local) && (state == "" || s.state == state) {
			return true
		}
	}
	return false
}

// hasPort says whether a socket is bound to port on any address, in state
// state ("" for any).
func (t sockets) hasPort(port uint16, state string) bool {
	p := fmt.Sprintf(":%04X", port)
	for _, s := range t {
		if strings.HasSuffix(s.local, p) && (state == "" || s.state == state) {
			return true
		}
	}
	return false
}

// ownLocals is local (an IPv4 address) as /proc/net prints it: in an IPv4
// socket, and mapped in an IPv6 one.
func ownLocals(local netip.AddrPort) []string {
	a := local.Addr().As4()
	m := local.Addr().As16()
	return []string{
		fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(a[:]), local.Port()),
		fmt.Sprintf("0000000000000000%08X%08X:%04X", binary.NativeEndian.Uint32(m[8:12]), binary.NativeEndian.Uint32(m[12:]), local.Port()),
	}
}

// wildcardLocals is port on every address (0.0.0.0, ::, ::ffff:0.0.0.0) as
// /proc/net prints it.
func wildcardLocals(port uint16) []string {
	p := fmt.Sprintf(":%04X", port)
	return []string{"00000000" + p, "00000000000000000000000000000000" + p, "0000000000000000FFFF000000000000" + p}
}

// sockname answers a getsockname() of the command: its own loopback
// address shown as 127.0.0.1 (::ffff:127.0.0.1 in an IPv6 socket); any
// other socket's address as the kernel gives it (the call continues).
func (n *Notifier) sockname(req *seccomp.Notif) verdict {
	if !n.emulated() {
		return allow()
	}
	a := req.Args
	sfd, dom, v, ok := n.targetSocket(req, int(int32(a[0])))
	if !ok {
		return v
	}
	defer unix.Close(sfd)
	if dom != unix.AF_INET && dom != unix.AF_INET6 {
		return allow()
	}
	sa, err := unix.Getsockname(sfd)
	if err != nil {
		return errnoVerdict(err, 0)
	}
	local, ok := sockaddrAddrPort(sa)
	if !ok || local.Addr() != n.egress.own {
		return allow()
	}
	name := rawInet(uint16(dom), netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), local.Port()))
	pid := int(req.Pid)
	lb, err := resolve.ReadBytes(pid, a[2], 4)
	if err != nil {
		return verdict{errno: unix.EFAULT}
	}
	room := int(int32(binary.LittleEndian.Uint32(lb)))
	if room < 0 {
		return verdict{errno: unix.EINVAL}
	}
	if k := min(room, len(name)); k > 0 {
		if err := writeBytes(pid, a[1], name[:k]); err != nil {
			return verdict{errno: unix.EFAULT}
		}
	}
	binary.LittleEndian.PutUint32(lb, uint32(len(name)))
	if err := writeBytes(pid, a[2], lb); err != nil {
		return verdict{errno: unix.EFAULT}
	}
	return verdict{}
}
