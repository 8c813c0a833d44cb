//go:build linux

package supervisor

import (
	"encoding/binary"
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

// littleEndian: /proc/net prints addresses as native-endian words; the
// expected strings below are a little-endian host's.
func littleEndian(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the expected /proc/net strings are a little-endian host's")
	}
}

// TestOwnLocals: the own address at a port as /proc/net prints it, in an
// IPv4 table and mapped in an IPv6 one, the port always four hex digits.
func TestOwnLocals(t *testing.T) {
	littleEndian(t)
	for _, tc := range []struct {
		local string
		want  []string
	}{
		{"127.70.1.2:8080", []string{"0201467F:1F90", "0000000000000000FFFF00000201467F:1F90"}},
		{"127.64.0.1:0", []string{"0100407F:0000", "0000000000000000FFFF00000100407F:0000"}},
		{"127.127.255.254:31", []string{"FEFF7F7F:001F", "0000000000000000FFFF0000FEFF7F7F:001F"}},
		{"127.70.1.2:65535", []string{"0201467F:FFFF", "0000000000000000FFFF00000201467F:FFFF"}},
	} {
		assert.Equal(t, tc.want, ownLocals(netip.MustParseAddrPort(tc.local)), tc.local)
	}
}

// TestWildcardLocalsFormat: a port on 0.0.0.0, :: and ::ffff:0.0.0.0.
func TestWildcardLocalsFormat(t *testing.T) {
	for _, tc := range []struct {
		port uint16
		want []string
	}{
		{80, []string{"00000000:0050", "00000000000000000000000000000000:0050", "0000000000000000FFFF000000000000:0050"}},
		{0, []string{"00000000:0000", "00000000000000000000000000000000:0000", "0000000000000000FFFF000000000000:0000"}},
		{0xabcd, []string{"00000000:ABCD", "00000000000000000000000000000000:ABCD", "0000000000000000FFFF000000000000:ABCD"}},
	} {
		assert.Equal(t, tc.want, wildcardLocals(tc.port), "%d", tc.port)
	}
}

// TestSocketsHas: a socket table (as read from /proc/net) holds a socket
// at one of some addresses, or at a port on any address, in a state or in
// any ("").
func TestSocketsHas(t *testing.T) {
	littleEndian(t)
	tbl := sockets{
		{"0201467F:1F90", "0A"},                         // 127.70.1.2:8080, listening
		{"0000000000000000FFFF00000201467F:0035", "07"}, // [::ffff:127.70.1.2]:53, udp
		{"00000000:0050", "0A"},                         // 0.0.0.0:80
		{"0100007F:0F91", "01"},                         // 127.0.0.1:3985, established
	}
	own := netip.MustParseAddr("127.70.1.2")
	for _, tc := range []struct {
		what   string
		locals []string
		state  string
		want   bool
	}{
		{"own, listening", ownLocals(netip.AddrPortFrom(own, 8080)), "0A", true},
		{"own, any state", ownLocals(netip.AddrPortFrom(own, 8080)), "", true},
		{"own, established", ownLocals(netip.AddrPortFrom(own, 8080)), "01", false},
		{"own, mapped", ownLocals(netip.AddrPortFrom(own, 53)), "", true},
		{"own, another port", ownLocals(netip.AddrPortFrom(own, 8081)), "", false},
		{"another address", ownLocals(netip.MustParseAddrPort("127.70.1.3:8080")), "", false},
		{"wildcard", wildcardLocals(80), "0A", true},
		{"wildcard, another port", wildcardLocals(8080), "", false},
		{"no addresses", nil, "", false},
	} {
		assert.Equal(t, tc.want, tbl.has(tc.locals, tc.state), tc.what)
	}
	assert.False(t, sockets(nil).has(wildcardLocals(80), ""), "empty table")

	for _, tc := range []struct {
		port  uint16
		state string
		want  bool
	}{
		{8080, "0A", true},
		{8080, "", true},
		{8080, "01", false},
		{53, "", true},
		{53, "0A", false},
		{80, "0A", true},
		{3985, "01", true},
		{3985, "0A", false},
		{0xF90, "", false}, // 0F90 is not the tail of 1F90
		{0x90, "", false},
		{0x1F9, "", false},
		{0, "", false},
	} {
		assert.Equal(t, tc.want, tbl.hasPort(tc.port, tc.state), "port %#x state %q", tc.port, tc.state)
	}
}

// TestSockaddrAddrPort: a socket address as an AddrPort, a v4-mapped one
// unmapped; not an inet one, none.
func TestSockaddrAddrPort(t *testing.T) {
	for _, tc := range []struct {
		what string
		sa   unix.Sockaddr
		want string // "" for none
	}{
		{"v4", &unix.SockaddrInet4{Port: 8080, Addr: [4]byte{127, 70, 1, 2}}, "127.70.1.2:8080"},
		{"v6", &unix.SockaddrInet6{Port: 443, Addr: netip.MustParseAddr("2001:db8::1").As16()}, "[2001:db8::1]:443"},
		{"v6 mapped", &unix.SockaddrInet6{Port: 53, Addr: netip.MustParseAddr("::ffff:127.0.0.1").As16()}, "127.0.0.1:53"},
		{"v6 unspecified", &unix.SockaddrInet6{}, "[::]:0"},
		{"unix", &unix.SockaddrUnix{Name: "/tmp/s"}, ""},
		{"nil", nil, ""},
	} {
		ap, ok := sockaddrAddrPort(tc.sa)
		assert.Equal(t, tc.want != "", ok, tc.what)
		if tc.want != "" {
			assert.Equal(t, netip.MustParseAddrPort(tc.want), ap, tc.what)
		}
	}
}

// TestRawInetLayout: the bytes of a sockaddr_in and a sockaddr_in6 the
// supervisor hands the kernel: family in host order, port in network
// order, an IPv4 address mapped in an IPv6 one (unmapped in an IPv4 one).
func TestRawInetLayout(t *testing.T) {
	littleEndian(t)
	for _, tc := range []struct {
		fam  uint16
		dest string
		want []byte
	}{
		{unix.AF_INET, "127.70.1.2:8080", []byte{2, 0, 0x1f, 0x90, 127, 70, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0}},
		{unix.AF_INET, "[::ffff:127.0.0.1]:1", []byte{2, 0, 0, 1, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}},
		{unix.AF_INET6, "127.0.0.1:65535", []byte{10, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1, 0, 0, 0, 0}},
		{unix.AF_INET6, "[::1]:0", []byte{10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
	} {
		assert.Equal(t, tc.want, rawInet(tc.fam, netip.MustParseAddrPort(tc.dest)), "%d %s", tc.fam, tc.dest)
	}
}
