//go:build linux

package supervisor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestInetControlOKLevels: an allowed type counts only at its own level
// (IP_TOS is 1, which at IPPROTO_IPV6 is IPV6_ADDRFORM; IPV6_TCLASS at
// IPPROTO_IP is not one), and one refused message refuses the lot,
// wherever it is.
func TestInetControlOKLevels(t *testing.T) {
	cm := func(level, typ int32) unix.SocketControlMessage {
		return unix.SocketControlMessage{Header: unix.Cmsghdr{Level: level, Type: typ}}
	}
	ok := []unix.SocketControlMessage{
		cm(unix.SOL_UDP, unix.UDP_SEGMENT), cm(unix.IPPROTO_IP, unix.IP_TOS), cm(unix.IPPROTO_IP, unix.IP_TTL),
		cm(unix.IPPROTO_IPV6, unix.IPV6_TCLASS), cm(unix.IPPROTO_IPV6, unix.IPV6_HOPLIMIT),
	}
	for _, tc := range []struct {
		what string
		msgs []unix.SocketControlMessage
		want bool
	}{
		{"empty", []unix.SocketControlMessage{}, true},
		{"all five", ok, true},
		{"IP_TOS at IPPROTO_IPV6", []unix.SocketControlMessage{cm(unix.IPPROTO_IPV6, unix.IP_TOS)}, false},
		{"IP_TTL at SOL_UDP", []unix.SocketControlMessage{cm(unix.SOL_UDP, unix.IP_TTL)}, false},
		{"IPV6_TCLASS at IPPROTO_IP", []unix.SocketControlMessage{cm(unix.IPPROTO_IP, unix.IPV6_TCLASS)}, false},
		{"IPV6_HOPLIMIT at IPPROTO_IP", []unix.SocketControlMessage{cm(unix.IPPROTO_IP, unix.IPV6_HOPLIMIT)}, false},
		{"UDP_SEGMENT at IPPROTO_IP", []unix.SocketControlMessage{cm(unix.IPPROTO_IP, unix.UDP_SEGMENT)}, false},
		{"UDP_CORK", []unix.SocketControlMessage{cm(unix.SOL_UDP, unix.UDP_CORK)}, false},
		{"SCM_RIGHTS", []unix.SocketControlMessage{cm(unix.SOL_SOCKET, unix.SCM_RIGHTS)}, false},
		{"IP_TOS at SOL_SOCKET (SO_DEBUG)", []unix.SocketControlMessage{cm(unix.SOL_SOCKET, unix.IP_TOS)}, false},
		{"IPV6_PKTINFO", []unix.SocketControlMessage{cm(unix.IPPROTO_IPV6, unix.IPV6_PKTINFO)}, false},
		{"IP_PKTINFO last", append(append([]unix.SocketControlMessage{}, ok...), cm(unix.IPPROTO_IP, unix.IP_PKTINFO)), false},
		{"SCM_RIGHTS first", append([]unix.SocketControlMessage{cm(unix.SOL_SOCKET, unix.SCM_RIGHTS)}, ok...), false},
	} {
		assert.Equal(t, tc.want, inetControlOK(tc.msgs), tc.what)
	}
}

// TestCmsg: an encoded control message parses back to its level, type and
// data, padded to its aligned size.
func TestCmsg(t *testing.T) {
	for _, tc := range []struct {
		level, typ int32
		data       []byte
	}{
		{unix.SOL_SOCKET, unix.SCM_RIGHTS, []byte{3, 0, 0, 0, 4, 0, 0, 0}},
		{unix.IPPROTO_IP, unix.IP_TTL, []byte{64, 0, 0, 0}},
		{unix.SOL_UDP, unix.UDP_SEGMENT, []byte{0xdc, 0x05}},
		{unix.IPPROTO_IPV6, unix.IPV6_TCLASS, []byte{1}},
		{unix.SOL_SOCKET, unix.SCM_CREDENTIALS, []byte{}},
	} {
		b := cmsg(tc.level, tc.typ, tc.data)
		assert.Len(t, b, unix.CmsgSpace(len(tc.data)), "%d/%d", tc.level, tc.typ)
		msgs, err := unix.ParseSocketControlMessage(b)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		assert.Equal(t, tc.level, msgs[0].Header.Level)
		assert.Equal(t, tc.typ, msgs[0].Header.Type)
		assert.Equal(t, uint64(unix.CmsgLen(len(tc.data))), msgs[0].Header.Len)
		assert.Equal(t, tc.data, msgs[0].Data)
	}
}
