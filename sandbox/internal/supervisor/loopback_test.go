//go:build linux

package supervisor

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestNewOwnLoopback: the own address lies in 127.64.0.0/10, never .0 or
// .255, and differs from one command to the next.
func TestNewOwnLoopback(t *testing.T) {
	seen := map[netip.Addr]bool{}
	for range 1000 {
		a := newOwnLoopback()
		require.True(t, ownLoopbackNet.Contains(a), "%v", a)
		b := a.As4()
		assert.NotContains(t, []byte{0, 255}, b[3], "%v", a)
		seen[a] = true
	}
	assert.Greater(t, len(seen), 990, "picked at random")
}

func TestLoopbackDest(t *testing.T) {
	for _, c := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1", true}, {"127.9.8.7", true}, {"::1", true}, {"::ffff:127.0.0.1", true},
		{"0.0.0.0", true}, {"::", true},
		{"10.0.0.1", false}, {"192.0.2.1", false}, {"::ffff:10.0.0.1", false}, {"2001:db8::1", false},
	} {
		assert.Equal(t, c.want, loopbackDest(netip.MustParseAddr(c.addr)), c.addr)
	}
}

// TestRawInet: the socket addresses the supervisor binds and sends to, as
// the kernel reads them back.
func TestRawInet(t *testing.T) {
	own := netip.MustParseAddrPort("127.70.1.2:8080")
	b := rawInet(unix.AF_INET, own)
	got, ok := sockaddrInet(b)
	require.True(t, ok)
	assert.Equal(t, own, got)
	assert.Len(t, b, unix.SizeofSockaddrInet4)
	b = rawInet(unix.AF_INET6, own)
	got, ok = sockaddrInet(b)
	require.True(t, ok)
	assert.Equal(t, netip.MustParseAddrPort("[::ffff:127.70.1.2]:8080"), got)
	assert.Len(t, b, unix.SizeofSockaddrInet6)
}

// TestOwnPortInUse: a socket bound to the own address, in an IPv4 socket
// or mapped in an IPv6 one, is found in /proc/net at its port and state;
// another address at that port, or another port, is not.
func TestOwnPortInUse(t *testing.T) {
	has := func(proto string, local netip.AddrPort, state string) bool {
		return readSockets("/proc/net", proto).has(ownLocals(local), state)
	}
	own := newOwnLoopback()
	ln, err := net.Listen("tcp4", netip.AddrPortFrom(own, 0).String())
	require.NoError(t, err)
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	assert.True(t, has("tcp", netip.AddrPortFrom(own, port), "0A"))
	assert.True(t, has("tcp", netip.AddrPortFrom(own, port), ""))
	assert.False(t, has("tcp", netip.AddrPortFrom(own, port+1), ""))
	assert.False(t, has("tcp", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), ""))
	assert.False(t, has("udp", netip.AddrPortFrom(own, port), ""))

	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Bind(fd, &unix.SockaddrInet6{Addr: own.As16()}))
	sa, err := unix.Getsockname(fd)
	require.NoError(t, err)
	uport := uint16(sa.(*unix.SockaddrInet6).Port)
	assert.True(t, has("udp", netip.AddrPortFrom(own, uport), ""), "mapped in an IPv6 socket")
	assert.False(t, has("udp", netip.AddrPortFrom(own, uport), "0A"))
}

// TestWildcardLocals: a socket bound to every address at a port (which
// would receive what is sent to the own address there) is found; one bound
// to the own address only is not.
func TestWildcardLocals(t *testing.T) {
	own := newOwnLoopback()
	pc, err := net.ListenPacket("udp4", netip.AddrPortFrom(own, 0).String())
	require.NoError(t, err)
	defer pc.Close()
	port := uint16(pc.LocalAddr().(*net.UDPAddr).Port)
	assert.False(t, readSockets("/proc/net", "udp").has(wildcardLocals(port), ""), "the own address only")

	wild, err := net.ListenPacket("udp4", "0.0.0.0:0")
	require.NoError(t, err)
	defer wild.Close()
	wport := uint16(wild.LocalAddr().(*net.UDPAddr).Port)
	assert.True(t, readSockets("/proc/net", "udp").has(wildcardLocals(wport), ""))
	assert.False(t, readSockets("/proc/net", "tcp").has(wildcardLocals(wport), ""))

	ln, err := net.Listen("tcp", "[::]:0") // dual-stack: ::
	require.NoError(t, err)
	defer ln.Close()
	tport := uint16(ln.Addr().(*net.TCPAddr).Port)
	assert.True(t, readSockets("/proc/net", "tcp").has(wildcardLocals(tport), "0A"))
	assert.False(t, readSockets("/proc/net", "tcp").has(wildcardLocals(tport), "01"))
}

// TestInetControlOK: only control data any sender may set, and that keeps
// a datagram's route, is passed on for an inet socket.
func TestInetControlOK(t *testing.T) {
	cm := func(level, typ int32) unix.SocketControlMessage {
		return unix.SocketControlMessage{Header: unix.Cmsghdr{Level: level, Type: typ}}
	}
	for _, c := range []struct {
		name string
		msgs []unix.SocketControlMessage
		want bool
	}{
		{"none", nil, true},
		{"gso", []unix.SocketControlMessage{cm(unix.SOL_UDP, unix.UDP_SEGMENT)}, true},
		{"tos ttl", []unix.SocketControlMessage{cm(unix.IPPROTO_IP, unix.IP_TOS), cm(unix.IPPROTO_IP, unix.IP_TTL)}, true},
		{"tclass hoplimit", []unix.SocketControlMessage{cm(unix.IPPROTO_IPV6, unix.IPV6_TCLASS), cm(unix.IPPROTO_IPV6, unix.IPV6_HOPLIMIT)}, true},
		{"source route", []unix.SocketControlMessage{cm(unix.IPPROTO_IP, unix.IP_RETOPTS)}, false},
		{"pktinfo", []unix.SocketControlMessage{cm(unix.IPPROTO_IP, unix.IP_PKTINFO)}, false},
		{"ttl then pktinfo6", []unix.SocketControlMessage{cm(unix.IPPROTO_IP, unix.IP_TTL), cm(unix.IPPROTO_IPV6, unix.IPV6_PKTINFO)}, false},
		{"credentials", []unix.SocketControlMessage{cm(unix.SOL_SOCKET, unix.SCM_CREDENTIALS)}, false},
	} {
		assert.Equal(t, c.want, inetControlOK(c.msgs), c.name)
	}
}

// TestSockaddrInetShort: an address too short for its family, or for a
// family at all (bind with a length of 0 or 1), is not one.
func TestSockaddrInetShort(t *testing.T) {
	for _, b := range [][]byte{nil, {2}, {2, 0, 0x1f}, {10, 0, 0, 80, 0, 0, 0, 0}} {
		_, ok := sockaddrInet(b)
		assert.False(t, ok, "%v", b)
	}
}
