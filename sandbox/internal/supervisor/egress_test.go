//go:build linux

package supervisor

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"
)

// TestSockaddrInet: a sockaddr_in needs 8 bytes, a sockaddr_in6 24 (no
// scope id); the port is in network byte order, the family in the host's;
// a mapped address stays mapped (the callers unmap it).
func TestSockaddrInet(t *testing.T) {
	v4 := []byte{unix.AF_INET, 0, 0x1f, 0x90, 192, 0, 2, 1}
	v6 := []byte{unix.AF_INET6, 0, 0, 53, 0, 0, 0, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	mapped := []byte{unix.AF_INET6, 0, 0, 80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1}
	for _, tc := range []struct {
		what string
		b    []byte
		want string // "" when not an inet address
	}{
		{"v4", v4, "192.0.2.1:8080"},
		{"v4 with sin_zero", append(append([]byte{}, v4...), 0, 0, 0, 0, 0, 0, 0, 0), "192.0.2.1:8080"},
		{"v4, 7 bytes", v4[:7], ""},
		{"v6, 24 bytes", v6, "[2001:db8::1]:53"},
		{"v6 with scope id", append(append([]byte{}, v6...), 0, 0, 0, 0), "[2001:db8::1]:53"},
		{"v6, 23 bytes", v6[:23], ""},
		{"v6 mapped", mapped, "[::ffff:127.0.0.1]:80"},
		{"v6 family, v4 length", append([]byte{unix.AF_INET6, 0}, v4[2:]...), ""},
		{"unix", []byte{unix.AF_UNIX, 0, '/', 't', 'm', 'p', '/', 's'}, ""},
		{"unspec", make([]byte, 16), ""},
		{"family big-endian", append([]byte{0, unix.AF_INET}, v4[2:]...), ""},
		{"family only", []byte{unix.AF_INET, 0}, ""},
	} {
		ap, ok := sockaddrInet(tc.b)
		assert.Equal(t, tc.want != "", ok, tc.what)
		if tc.want != "" {
			assert.Equal(t, netip.MustParseAddrPort(tc.want), ap, tc.what)
		} else {
			assert.Equal(t, netip.AddrPort{}, ap, tc.what)
		}
	}
}

// TestInetSockaddr: the address the supervisor connects or sends to, for a
// socket of family fam: an IPv4 one for AF_INET, else an IPv6 one (an IPv4
// destination mapped).
func TestInetSockaddr(t *testing.T) {
	for _, tc := range []struct {
		fam  uint16
		dest string
		want unix.Sockaddr
	}{
		{unix.AF_INET, "127.0.0.1:8080", &unix.SockaddrInet4{Port: 8080, Addr: [4]byte{127, 0, 0, 1}}},
		{unix.AF_INET, "10.0.0.53:53", &unix.SockaddrInet4{Port: 53, Addr: [4]byte{10, 0, 0, 53}}},
		{unix.AF_INET6, "127.0.0.1:80", &unix.SockaddrInet6{Port: 80, Addr: netip.MustParseAddr("::ffff:127.0.0.1").As16()}},
		{unix.AF_INET6, "[::1]:65535", &unix.SockaddrInet6{Port: 65535, Addr: netip.IPv6Loopback().As16()}},
		{unix.AF_INET6, "[2001:db8::1]:0", &unix.SockaddrInet6{Addr: netip.MustParseAddr("2001:db8::1").As16()}},
		{unix.AF_UNSPEC, "[::1]:1", &unix.SockaddrInet6{Port: 1, Addr: netip.IPv6Loopback().As16()}},
	} {
		assert.Equal(t, tc.want, inetSockaddr(tc.fam, netip.MustParseAddrPort(tc.dest)), "%d %s", tc.fam, tc.dest)
	}
}

// TestEgressLocal: in a net namespace of the command's own, a loopback
// destination is the sandbox's, and so is port 53 of a stub resolver's
// address under an allowlist; without an allowlist no port 53 is (a
// lookup fails at once), on the loopback neither.
func TestEgressLocal(t *testing.T) {
	allowlist := &Egress{NetNS: true, Proxy: netip.MustParseAddrPort("127.0.0.1:3128"), DNS: []netip.Addr{netip.MustParseAddr("10.0.2.3"), netip.MustParseAddr("fd00::3")}}
	off := &Egress{NetNS: true}
	offDNS := &Egress{NetNS: true, DNS: []netip.Addr{netip.MustParseAddr("10.0.2.3")}}
	for _, tc := range []struct {
		dest                   string
		allowlist, off, offDNS bool
	}{
		{"127.0.0.1:80", true, true, true},
		{"127.9.8.7:8080", true, true, true},
		{"[::1]:443", true, true, true},
		{"127.0.0.53:53", true, false, false},
		{"[::1]:53", true, false, false},
		{"10.0.2.3:53", true, false, false},
		{"[fd00::3]:53", true, false, false},
		{"10.0.2.3:80", false, false, false},
		{"10.0.2.3:5353", false, false, false},
		{"10.0.2.4:53", false, false, false},
		{"[fd00::4]:53", false, false, false},
		{"0.0.0.0:80", false, false, false},
		{"[::]:80", false, false, false},
		{"192.0.2.1:443", false, false, false},
		{"127.0.0.1:0", true, true, true},
	} {
		dest := netip.MustParseAddrPort(tc.dest)
		assert.Equal(t, tc.allowlist, allowlist.local(dest), "allowlist: %s", tc.dest)
		assert.Equal(t, tc.off, off.local(dest), "network off: %s", tc.dest)
		assert.Equal(t, tc.offDNS, offDNS.local(dest), "network off, resolver addresses: %s", tc.dest)
	}
}

// TestEgressReason: a refused destination names the proxy under an
// allowlist (any valid proxy address, port 0 too), else the network off.
func TestEgressReason(t *testing.T) {
	for _, tc := range []struct {
		proxy netip.AddrPort
		want  string
	}{
		{netip.MustParseAddrPort("127.0.0.1:3128"), reasonEgress},
		{netip.MustParseAddrPort("[::1]:3128"), reasonEgress},
		{netip.MustParseAddrPort("127.0.0.1:0"), reasonEgress},
		{netip.AddrPort{}, reasonNetworkOff},
	} {
		assert.Equal(t, tc.want, (&Egress{Proxy: tc.proxy}).reason(), "%v", tc.proxy)
	}
}

// TestEmulated: the loopback is emulated only with an egress that has an
// own address, on a host that can copy the command's sockets.
func TestEmulated(t *testing.T) {
	own := netip.MustParseAddr("127.70.1.2")
	for _, tc := range []struct {
		what   string
		egress *Egress
		nocopy bool
		want   bool
	}{
		{"no egress", nil, false, false},
		{"net namespace (no own address)", &Egress{NetNS: true}, false, false},
		{"own address", &Egress{own: own}, false, true},
		{"own address, no pidfd_getfd", &Egress{own: own}, true, false},
		{"no egress, no pidfd_getfd", nil, true, false},
	} {
		n := &Notifier{egress: tc.egress, nocopy: tc.nocopy}
		assert.Equal(t, tc.want, n.emulated(), tc.what)
	}
}
