//go:build linux

package supervisor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"
)

// TestCmdSocketFresh: only an unbound, unconnected socket may be replaced
// (whatever its type, state or flags).
func TestCmdSocketFresh(t *testing.T) {
	for _, tc := range []struct {
		s    cmdSocket
		want bool
	}{
		{cmdSocket{typ: unix.SOCK_STREAM, state: tcpClose}, true},
		{cmdSocket{typ: unix.SOCK_DGRAM, nonblock: true, cloexec: true, mode: 0o777}, true},
		{cmdSocket{typ: unix.SOCK_STREAM, state: tcpListen, bound: true}, false},
		{cmdSocket{typ: unix.SOCK_DGRAM, peer: true}, false},
		{cmdSocket{typ: unix.SOCK_SEQPACKET, state: tcpEstablished, bound: true, peer: true}, false},
	} {
		assert.Equal(t, tc.want, tc.s.fresh(), "%+v", tc.s)
	}
}

// TestEachAttr: netlink attributes, each a 4-byte header (length with the
// header, type) and its value, padded to 4 bytes; the last may lack its
// padding; a length below the header or past the buffer is EPROTO, and a
// tail too short for a header is ignored.
func TestEachAttr(t *testing.T) {
	type attr struct {
		typ uint16
		val []byte
	}
	for _, tc := range []struct {
		what string
		b    []byte
		want []attr
		err  error
	}{
		{"empty", nil, nil, nil},
		{"empty value", []byte{4, 0, 1, 0}, []attr{{1, []byte{}}}, nil},
		{"padded, then another", []byte{5, 0, 2, 0, 0xaa, 0, 0, 0, 8, 0, 3, 0, 1, 2, 3, 4}, []attr{{2, []byte{0xaa}}, {3, []byte{1, 2, 3, 4}}}, nil},
		{"last unpadded", []byte{8, 0, 1, 0, 1, 2, 3, 4, 6, 0, 2, 0, 9, 9}, []attr{{1, []byte{1, 2, 3, 4}}, {2, []byte{9, 9}}}, nil},
		{"type above 255", []byte{4, 0, 0x34, 0x12}, []attr{{0x1234, []byte{}}}, nil},
		{"short tail ignored", []byte{4, 0, 1, 0, 9, 9, 9}, []attr{{1, []byte{}}}, nil},
		{"length below the header", []byte{3, 0, 1, 0}, nil, unix.EPROTO},
		{"length 0", []byte{0, 0, 1, 0, 0, 0, 0, 0}, nil, unix.EPROTO},
		{"length past the buffer", []byte{9, 0, 1, 0, 1, 2, 3, 4}, nil, unix.EPROTO},
		{"good, then past the buffer", []byte{4, 0, 1, 0, 12, 0, 2, 0}, []attr{{1, []byte{}}}, unix.EPROTO},
	} {
		var got []attr
		err := eachAttr(tc.b, func(typ uint16, val []byte) { got = append(got, attr{typ, val}) })
		assert.Equal(t, tc.err, err, tc.what)
		assert.Equal(t, tc.want, got, tc.what)
	}
}
