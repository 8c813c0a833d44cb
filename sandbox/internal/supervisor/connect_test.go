//go:build linux

package supervisor

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// TestErrnoVerdict: an emulated call answers with its error's errno
// (wrapped or not), success with its value, no answer when abandoned, and
// EIO for an error that carries no errno.
func TestErrnoVerdict(t *testing.T) {
	for _, tc := range []struct {
		what string
		err  error
		val  uint64
		want verdict
	}{
		{"success", nil, 7, verdict{val: 7}},
		{"success, no value", nil, 0, verdict{}},
		{"errno", unix.ECONNREFUSED, 0, verdict{errno: unix.ECONNREFUSED}},
		{"errno, value dropped", unix.EAGAIN, 5, verdict{errno: unix.EAGAIN}},
		{"wrapped errno", fmt.Errorf("connect: %w", unix.EACCES), 0, verdict{errno: unix.EACCES}},
		{"syscall error", os.NewSyscallError("sendmsg", unix.EPIPE), 0, verdict{errno: unix.EPIPE}},
		{"abandoned", errAbandoned, 3, verdict{abandon: true}},
		{"abandoned, wrapped", fmt.Errorf("wait: %w", errAbandoned), 0, verdict{abandon: true}},
		{"no errno", errors.New("short read"), 0, verdict{errno: unix.EIO}},
	} {
		assert.Equal(t, tc.want, errnoVerdict(tc.err, tc.val), tc.what)
	}
}

// TestInetAddress: a sockaddr_in or sockaddr_in6 as "ip:port" (the port in
// network byte order); one too short for its family, or of another family,
// by its family number.
func TestInetAddress(t *testing.T) {
	v4 := func(port [2]byte, ip ...byte) []byte {
		return append([]byte{unix.AF_INET, 0, port[0], port[1]}, ip...)
	}
	v6 := func(port [2]byte, ip ...byte) []byte {
		return append([]byte{unix.AF_INET6, 0, port[0], port[1], 0, 0, 0, 0}, ip...)
	}
	loop6 := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	mapped := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1}
	for _, tc := range []struct {
		what string
		b    []byte
		want string
	}{
		{"v4", v4([2]byte{0x1f, 0x90}, 192, 0, 2, 1), "192.0.2.1:8080"},
		{"v4 padded", append(v4([2]byte{0, 80}, 127, 0, 0, 1), 0, 0, 0, 0, 0, 0, 0, 0), "127.0.0.1:80"},
		{"v4 port 0", v4([2]byte{}, 0, 0, 0, 0), "0.0.0.0:0"},
		{"v4 port 65535", v4([2]byte{0xff, 0xff}, 10, 0, 0, 1), "10.0.0.1:65535"},
		{"v4 short", v4([2]byte{0, 80}, 127, 0, 0), "family 2"},
		{"v6 loopback", append(v6([2]byte{0, 22}, loop6...), 0, 0, 0, 0), "[::1]:22"},
		{"v6 without scope id (24 bytes)", v6([2]byte{1, 187}, loop6...), "[::1]:443"},
		{"v6 mapped", v6([2]byte{0x1f, 0x90}, mapped...), "[::ffff:127.0.0.1]:8080"},
		{"v6 short", v6([2]byte{0, 22}, loop6[:15]...), "family 10"},
		{"unix", []byte{unix.AF_UNIX, 0, '/', 't'}, "family 1"},
		{"family only", []byte{unix.AF_INET, 0}, "family 2"},
	} {
		assert.Equal(t, tc.want, inetAddress(tc.b), tc.what)
	}
}

// TestSendtoDataSize: a sendto's length is judged from its register before
// anything is read: none is no data, past maxDatagram (or negative as an
// int) is EMSGSIZE.
func TestSendtoDataSize(t *testing.T) {
	for _, tc := range []struct {
		size   uint64
		ok     bool
		errno  unix.Errno
		noData bool
	}{
		{0, true, 0, true},
		{maxDatagram + 1, false, unix.EMSGSIZE, true},
		{1 << 40, false, unix.EMSGSIZE, true},
		{^uint64(0), false, unix.EMSGSIZE, true},
		{1 << 63, false, unix.EMSGSIZE, true},
	} {
		req := &seccomp.Notif{Args: [6]uint64{3, 0x1000, tc.size}}
		data, v, ok := sendtoData(req)
		assert.Equal(t, tc.ok, ok, "%#x", tc.size)
		assert.Equal(t, verdict{errno: tc.errno}, v, "%#x", tc.size)
		assert.Nil(t, data, "%#x", tc.size)
	}
}
