//go:build linux

package supervisor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"
)

// TestBindTargetName: a bind address for a fact — a path up to its first
// NUL, an abstract name as "@name", an inet address as "ip:port" — and
// nothing for an autobind, a too short address or another family.
func TestBindTargetName(t *testing.T) {
	unixAddr := func(name string) []byte { return append([]byte{unix.AF_UNIX, 0}, name...) }
	for _, tc := range []struct {
		what          string
		addr          []byte
		path, address string
	}{
		{"nil", nil, "", ""},
		{"family only (autobind)", unixAddr(""), "", ""},
		{"one byte", []byte{unix.AF_UNIX}, "", ""},
		{"path", unixAddr("/tmp/s"), "/tmp/s", ""},
		{"path, NUL terminated", unixAddr("/tmp/s\x00junk"), "/tmp/s", ""},
		{"relative path", unixAddr("s.sock\x00"), "s.sock", ""},
		{"abstract", unixAddr("\x00agent"), "", "@agent"},
		{"abstract, padded", unixAddr("\x00ab\x00\x00"), "", "@ab"},
		{"abstract, empty", unixAddr("\x00"), "", "@"},
		{"inet", []byte{unix.AF_INET, 0, 0x1f, 0x90, 127, 0, 0, 1}, "", "127.0.0.1:8080"},
		{"inet, short", []byte{unix.AF_INET, 0, 0x1f, 0x90}, "", "family 2"},
		{"inet6", []byte{unix.AF_INET6, 0, 0, 22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, "", "[::1]:22"},
		{"netlink", []byte{unix.AF_NETLINK, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "", ""},
		{"family in the wrong byte", []byte{0, unix.AF_UNIX, '/', 'x'}, "", ""},
	} {
		path, address := bindTargetName(tc.addr)
		assert.Equal(t, tc.path, path, tc.what)
		assert.Equal(t, tc.address, address, tc.what)
	}
}

// TestOwnSockets: a socket file is the sandbox's by device and inode both.
func TestOwnSockets(t *testing.T) {
	var o ownSockets
	assert.False(t, o.has(&unix.Stat_t{Dev: 1, Ino: 2}), "empty")
	o.add(sockID{dev: 1, ino: 2})
	o.add(sockID{dev: 1<<40 | 3, ino: 1 << 50})
	for _, tc := range []struct {
		dev, ino uint64
		want     bool
	}{
		{1, 2, true},
		{1, 3, false},
		{2, 2, false},
		{2, 1, false},
		{1<<40 | 3, 1 << 50, true},
		{3, 1 << 50, false},
		{0, 0, false},
	} {
		assert.Equal(t, tc.want, o.has(&unix.Stat_t{Dev: tc.dev, Ino: tc.ino}), "%d:%d", tc.dev, tc.ino)
	}
}
