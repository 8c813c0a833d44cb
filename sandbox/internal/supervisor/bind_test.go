//go:build linux

package supervisor

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
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

// TestBindRestarted: a signal that interrupts a bind the supervisor has
// performed loses its answer, and the call restarts (Go's handlers have
// SA_RESTART); the restarted bind succeeds — the socket is bound where the
// command asked — on every strategy, where the kernel's answer for a bound
// socket would be EINVAL. A later bind of the bound socket is EINVAL again.
func TestBindRestarted(t *testing.T) {
	for _, st := range strategies {
		t.Run(st.name, func(t *testing.T) {
			ws := workspace(t)
			var interrupted atomic.Int32
			interrupt := func(n *Notifier) {
				n.beforeAnswer = func(req *seccomp.Notif) {
					if n.table[req.Nr].Name != "bind" || !interrupted.CompareAndSwap(0, 1) {
						return
					}
					// SIGURG, the Go scheduler's preemption signal: its
					// handler runs on the thread, and the call restarts.
					require.NoError(t, unix.Tgkill(unix.Getpid(), int(req.Pid), unix.SIGURG))
					deadline := time.Now().Add(10 * time.Second)
					for seccomp.Valid(n.fd, req.ID) {
						if time.Now().After(deadline) {
							t.Error("the signal did not end the notification")
							return
						}
						time.Sleep(time.Millisecond)
					}
					interrupted.Store(2)
				}
			}
			s, log := startSandbox(t, ws, st.copies, st.sharedFS, interrupt)
			path := filepath.Join(ws, "s.sock")
			var srv int
			var bindErr, rebind error
			s.do(func() {
				srv, _ = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				bindErr = unix.Bind(srv, &unix.SockaddrUnix{Name: path})
				rebind = unix.Bind(srv, &unix.SockaddrUnix{Name: path + "2"})
			})
			defer unix.Close(srv)
			require.Equal(t, int32(2), interrupted.Load(), "the first bind's answer was lost")
			require.NoError(t, bindErr, "the restarted bind")
			assert.ErrorIs(t, rebind, unix.EINVAL)
			sa, err := unix.Getsockname(srv)
			require.NoError(t, err)
			assert.Equal(t, "s.sock", filepath.Base(sa.(*unix.SockaddrUnix).Name))
			var fst unix.Stat_t
			require.NoError(t, unix.Lstat(path, &fst))
			assert.Equal(t, uint32(unix.S_IFSOCK), fst.Mode&unix.S_IFMT)
			assert.Empty(t, log.List())
		})
	}
}
