//go:build linux

package supervisor

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/resolve"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// Egress is what a command under a network allowlist may connect to over
// inet sockets (the filter's seccomp.Spec.Inet). Set it with SetEgress
// before Run.
type Egress struct {
	// NetNS: the command has a net namespace of its own, whose loopback
	// holds the proxy's and the hosts' listeners (passed to the
	// supervisor): any loopback destination is the sandbox's own, and
	// every other one is refused.
	NetNS bool
	// Proxy is the egress proxy's address on the host's loopback, and Hosts
	// the allowlist's loopback services: without a net namespace the only
	// destinations, connected by the supervisor itself.
	Proxy netip.AddrPort
	Hosts []netip.AddrPort
	// DNS are the stub resolver's addresses in the net namespace (port
	// 53, UDP), reachable there besides the loopback.
	DNS []netip.Addr
	// Connecting is told the local port of a socket the supervisor is
	// about to connect to Proxy (bound first), so that the proxy accepts
	// that connection, and only such connections, for this command.
	Connecting func(port uint16)

	// own is the command's own loopback address on the host's loopback,
	// without a net namespace (loopback_linux.go).
	own netip.Addr
}

// SetEgress lets the command reach what e allows; call it before Run.
// Without a net namespace the command gets a loopback address of its own
// on the host's (loopback_linux.go).
func (n *Notifier) SetEgress(e *Egress) {
	if e != nil && !e.NetNS {
		e.own = newOwnLoopback()
	}
	n.egress = e
}

// reasonEgress is the reason of a refused inet connect under an allowlist.
const reasonEgress = "only the egress proxy is reachable: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY"

// reasonNetworkOff is the reason of a refused inet connect or send with the
// network off and no allowlist.
const reasonNetworkOff = "the network is off: only the sandbox's own loopback is reachable"

// reasonOwnLoopback is the reason of a loopback connect that found no
// listener in the sandbox's net namespace where the host has one.
const reasonOwnLoopback = "the sandbox's loopback is its own: the host's listener on this port is out of reach"

// reason is the reason of a refused inet destination.
func (e *Egress) reason() string {
	if e.Proxy.IsValid() {
		return reasonEgress
	}
	return reasonNetworkOff
}

// connectInet decides an inet connect under an allowlist; handled is
// false for every other family, left to connect.
func (n *Notifier) connectInet(req *seccomp.Notif, rule seccomp.Rule) (v verdict, handled bool) {
	a := req.Args
	b, v, ok := readSockaddr(req, a[1], a[2])
	if !ok {
		return v, v != verdict{}
	}
	fam := binary.LittleEndian.Uint16(b)
	if fam != unix.AF_INET && fam != unix.AF_INET6 {
		return verdict{}, false
	}
	ap, ok := sockaddrInet(b)
	if !ok {
		return verdict{errno: unix.EINVAL}, true
	}
	dest := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	refuse := func() verdict {
		v := n.deny(rule, unix.EACCES, "", dest.String())
		v.fact.Reason = n.egress.reason()
		return v
	}
	if n.egress.NetNS {
		// The namespace's loopback (and the stub resolver's addresses on
		// it) are the sandbox's own. Still the supervisor connects its
		// copy of the socket itself rather than letting the call
		// continue: in between, the command could dup2 a unix socket onto
		// the descriptor and rewrite the address to a host socket's path.
		if !n.egress.local(dest) {
			return refuse(), true
		}
		sfd, dom, v, ok := n.targetSocket(req, int(int32(a[0])))
		if !ok {
			return v, true
		}
		defer unix.Close(sfd)
		if dom != unix.AF_INET && dom != unix.AF_INET6 {
			return verdict{errno: unix.EINVAL}, true // no longer the inet socket the address was for
		}
		bl, err := n.newBlocking(req, sfd)
		if err != nil {
			return errnoVerdict(err, 0), true
		}
		proto := "tcp"
		if typ, _ := unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_TYPE); typ == unix.SOCK_DGRAM {
			proto = "udp"
		}
		if dest.Addr().IsLoopback() && hostOnly(int(req.Pid), proto, dest.Port()) {
			// Nothing is there on the sandbox's loopback, and the host's
			// socket on that port is out of reach: the sandbox's doing
			// (refused at once, also for a non-blocking connect).
			v := n.deny(rule, unix.ECONNREFUSED, "", dest.String())
			v.fact.Reason = reasonOwnLoopback
			return v, true
		}
		return errnoVerdict(bl.connect(inetSockaddr(fam, dest)), 0), true
	}
	toProxy := dest == n.egress.Proxy
	if !toProxy && !slices.Contains(n.egress.Hosts, dest) {
		if n.emulated() {
			return n.connectOwn(req, rule, int(int32(a[0])), dest), true
		}
		return refuse(), true
	}
	if n.nocopy {
		// (An allowlist is refused on such a host before anything runs.)
		return n.unemulated(rule, "", dest.String(), "an inet socket cannot be connected for the command"), true
	}
	sfd, v, ok := targetFD(int(req.Pid), int(int32(a[0])), n.pending(req))
	if !ok {
		return v, true
	}
	defer unix.Close(sfd)
	if typ, err := unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_STREAM {
		return refuse(), true
	}
	sa := inetSockaddr(fam, dest)
	if toProxy && n.egress.Connecting != nil {
		port, err := boundPort(sfd, fam)
		if err != nil {
			return errnoVerdict(err, 0), true
		}
		n.egress.Connecting(port)
	}
	bl, err := n.newBlocking(req, sfd)
	if err != nil {
		return errnoVerdict(err, 0), true
	}
	return errnoVerdict(bl.connect(sa), 0), true
}

// inetSockaddr is dest as a socket address of family fam.
func inetSockaddr(fam uint16, dest netip.AddrPort) unix.Sockaddr {
	if fam == unix.AF_INET {
		return &unix.SockaddrInet4{Port: int(dest.Port()), Addr: dest.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(dest.Port()), Addr: dest.Addr().As16()} // ::ffff:a.b.c.d for IPv4
}

// boundPort binds an unbound inet socket to an ephemeral loopback port
// and returns its local port.
func boundPort(fd int, fam uint16) (uint16, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0, err
	}
	port := 0
	switch s := sa.(type) {
	case *unix.SockaddrInet4:
		port = s.Port
	case *unix.SockaddrInet6:
		port = s.Port
	}
	if port == 0 {
		var local unix.Sockaddr = &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
		if fam == unix.AF_INET6 {
			local = &unix.SockaddrInet6{}
		}
		if err := unix.Bind(fd, local); err != nil {
			return 0, err
		}
		if sa, err = unix.Getsockname(fd); err != nil {
			return 0, err
		}
		switch s := sa.(type) {
		case *unix.SockaddrInet4:
			port = s.Port
		case *unix.SockaddrInet6:
			port = s.Port
		}
	}
	return uint16(port), nil
}

// sockaddrInet parses a sockaddr_in or sockaddr_in6.
func sockaddrInet(b []byte) (netip.AddrPort, bool) {
	if len(b) < 2 {
		return netip.AddrPort{}, false
	}
	fam := binary.LittleEndian.Uint16(b)
	switch {
	case fam == unix.AF_INET && len(b) >= 8:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4])), true
	case fam == unix.AF_INET6 && len(b) >= 24:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), binary.BigEndian.Uint16(b[2:4])), true
	}
	return netip.AddrPort{}, false
}

// reasonHostPort is the reason of a refused inet bind or listen without a
// net namespace.
const reasonHostPort = "no port of the host may be opened under an allowlist"

// bindInet decides an inet bind under an allowlist: in a net namespace of
// the command's own the kernel (and Landlock's TCP rules) decide; without
// one only an ephemeral loopback port may be bound (urllib3 probes IPv6
// with a bind of [::1]:0), which listen then refuses: any other bind would
// take a port of the host.
func (n *Notifier) bindInet(rule seccomp.Rule, addr []byte) (verdict, bool) {
	if len(addr) < 2 || n.egress.NetNS {
		return verdict{}, false
	}
	ap, ok := sockaddrInet(addr)
	if !ok {
		return verdict{}, false
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if ap.Port() == 0 && ap.Addr().IsLoopback() {
		return verdict{}, false
	}
	v := n.deny(rule, unix.EACCES, "", ap.String())
	v.fact.Reason = reasonHostPort
	return v, true
}

// listen decides a listen() under an allowlist. In a net namespace of the
// command's own it is the kernel's. Without one an inet socket may not
// listen (bound or not: listen binds an unbound socket to a port of every
// interface); a unix socket may, and the supervisor listens on its copy of
// the socket itself, so that swapping the fd after the check changes
// nothing.
func (n *Notifier) listen(req *seccomp.Notif, rule seccomp.Rule) verdict {
	if n.egress == nil || n.egress.NetNS {
		return allow()
	}
	if n.nocopy {
		// (An allowlist is refused on such a host before anything runs.)
		return n.unemulated(rule, "", "", "a socket cannot be made to listen for the command")
	}
	a := req.Args
	sfd, dom, v, ok := n.targetSocket(req, int(int32(a[0])))
	if !ok {
		return v
	}
	defer unix.Close(sfd)
	if dom != unix.AF_UNIX && n.emulated() {
		return n.listenOwn(rule, sfd, int(int32(a[1])))
	}
	if dom != unix.AF_UNIX {
		addr := "unbound"
		if sa, err := unix.Getsockname(sfd); err == nil {
			switch s := sa.(type) {
			case *unix.SockaddrInet4:
				addr = netip.AddrPortFrom(netip.AddrFrom4(s.Addr), uint16(s.Port)).String()
			case *unix.SockaddrInet6:
				addr = netip.AddrPortFrom(netip.AddrFrom16(s.Addr).Unmap(), uint16(s.Port)).String()
			}
		}
		v := n.deny(rule, unix.EACCES, "", addr)
		v.fact.Reason = reasonHostPort
		return v
	}
	return errnoVerdict(unix.Listen(sfd, int(int32(a[1]))), 0)
}

// targetSocket takes a copy of the target's socket fd and returns it with
// its address family; ok is false (and v the answer) when it cannot — on a
// host without pidfd_getfd, always (EACCES).
func (n *Notifier) targetSocket(req *seccomp.Notif, fd int) (sfd, dom int, v verdict, ok bool) {
	if n.nocopy {
		return -1, 0, verdict{errno: unix.EACCES}, false
	}
	sfd, v, ok = targetFD(int(req.Pid), fd, n.pending(req))
	if !ok {
		return -1, 0, v, false
	}
	dom, err := unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		unix.Close(sfd)
		return -1, 0, errnoVerdict(err, 0), false // ENOTSOCK
	}
	return sfd, dom, verdict{}, true
}

// local reports whether dest is the sandbox's own in its net namespace: a
// loopback address, or port 53 of a stub resolver address. Without an
// allowlist there is no resolver: a name server's port on the loopback
// (systemd-resolved's 127.0.0.53) is refused, so that a lookup fails at
// once rather than waiting for an answer that cannot come.
func (e *Egress) local(dest netip.AddrPort) bool {
	if !e.Proxy.IsValid() && dest.Port() == 53 {
		return false
	}
	return dest.Addr().IsLoopback() || dest.Port() == 53 && slices.Contains(e.DNS, dest.Addr())
}

// hostOnly says whether a connection or datagram of protocol proto to
// loopback port port from process pid, in a net namespace of its own,
// finds nothing there while the host (the supervisor's namespace) has a
// listener (TCP) or a socket (UDP) on that port, out of reach. Read from
// /proc/net and /proc/PID/net (the process's namespace).
func hostOnly(pid int, proto string, port uint16) bool {
	state := ""
	if proto == "tcp" {
		state = "0A" // LISTEN
	}
	return readSockets("/proc/net", proto).hasPort(port, state) && !readSockets("/proc/"+strconv.Itoa(pid)+"/net", proto).hasPort(port, state)
}

// sendtoInet decides a sendto with an inet destination under an allowlist
// (a DNS query without connect, as musl sends them): in a net namespace of
// the command's own a local destination is the kernel's; anything else is
// refused. handled is false for other families.
func (n *Notifier) sendtoInet(req *seccomp.Notif, rule seccomp.Rule) (v verdict, handled bool) {
	a := req.Args
	b, v, ok := readSockaddr(req, a[4], a[5])
	if !ok {
		return v, v != verdict{}
	}
	ap, ok := sockaddrInet(b)
	if !ok {
		return verdict{}, false
	}
	dest := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if n.emulated() {
		return n.sendtoOwn(req, rule, dest), true
	}
	if !n.egress.NetNS || !n.egress.local(dest) {
		v = n.deny(rule, unix.EACCES, "", dest.String())
		v.fact.Reason = n.egress.reason()
		return v, true
	}
	if dest.Addr().IsLoopback() && hostOnly(int(req.Pid), "udp", dest.Port()) {
		v = n.deny(rule, unix.ECONNREFUSED, "", dest.String())
		v.fact.Reason = reasonOwnLoopback
		return v, true
	}
	// Sent from the supervisor's copy of the socket, with the bytes read
	// once: a continued call could be raced (connectInet).
	data, v, ok := sendtoData(req)
	if !ok {
		return v, true
	}
	sfd, dom, v, ok := n.targetSocket(req, int(int32(a[0])))
	if !ok {
		return v, true
	}
	defer unix.Close(sfd)
	if dom != unix.AF_INET && dom != unix.AF_INET6 {
		return verdict{errno: unix.EINVAL}, true
	}
	bl, err := n.newBlocking(req, sfd)
	if err != nil {
		return errnoVerdict(err, 0), true
	}
	to := inetSockaddr(binary.LittleEndian.Uint16(b), dest)
	sent, err := bl.send(int(int32(a[3])), true, func(flags int) (int, error) {
		return unix.SendmsgN(sfd, data, nil, to, flags)
	})
	return errnoVerdict(err, uint64(sent)), true
}

// inetName is a sendmsg's inet destination the supervisor sends to: its
// address as the kernel takes it, read once.
type inetName struct {
	name []byte
	dest netip.AddrPort
}

// sendmsgInet decides a sendmsg's inet destination (msg_name at name, of
// namelen bytes): in a net namespace of the command's own a local one is
// sent to (a UDP client of a server on the sandbox's loopback: libuv,
// Go's WriteMsgUDP); anything else is refused, as sendto's (sendtoInet).
// A destination of another family, or none, gives the zero inetName.
func (n *Notifier) sendmsgInet(req *seccomp.Notif, rule seccomp.Rule, name uint64, namelen int) (inetName, verdict, bool) {
	if n.egress == nil || name == 0 || namelen <= 0 {
		return inetName{}, verdict{}, true
	}
	b, v, ok := readSockaddr(req, name, uint64(namelen))
	if !ok {
		return inetName{}, v, v == verdict{}
	}
	ap, ok := sockaddrInet(b)
	if !ok {
		return inetName{}, verdict{}, true
	}
	dest := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if !n.emulated() && (!n.egress.NetNS || !n.egress.local(dest)) {
		v = n.deny(rule, unix.EACCES, "", dest.String())
		v.fact.Reason = n.egress.reason()
		return inetName{}, v, false
	}
	return inetName{name: b, dest: dest}, verdict{}, true
}

// readSockaddr reads the socket address of length alen at addr from the
// target. ok is false when it cannot: v is then the answer (EFAULT), or
// the zero verdict for a length no inet address has (left to the caller's
// other checks).
func readSockaddr(req *seccomp.Notif, addr, alen uint64) (b []byte, v verdict, ok bool) {
	n := int(uint32(alen))
	if n < 2 || n > sockaddrStorage {
		return nil, verdict{}, false
	}
	b, err := resolve.ReadBytes(int(req.Pid), addr, n)
	if err != nil {
		return nil, verdict{errno: unix.EFAULT}, false
	}
	return b, verdict{}, true
}
