package facts

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func TestDenialLine(t *testing.T) {
	for _, tc := range []struct {
		d    Denial
		want string
	}{
		{Denial{Op: "write", Path: "/etc/x", Syscall: "openat"}, "denied write /etc/x (read-only mode)"},
		{Denial{Op: "socket", Address: "AF_INET", Syscall: "socket"}, "denied socket AF_INET (read-only mode)"},
		{Denial{Op: "ptrace", Syscall: "ptrace"}, "denied ptrace (read-only mode)"},
		{Denial{Op: "namespace", Syscall: "unshare"}, "denied namespace unshare (read-only mode)"},
		{Denial{Op: "write", Path: "/tmp/a\nb", Syscall: "openat"}, `denied write /tmp/a\nb (read-only mode)`},
	} {
		assert.Equal(t, tc.want, tc.d.Line(modes.ReadOnly))
	}
}

func TestFactLogAggregates(t *testing.T) {
	l := NewLog()
	l.Add(Denial{Op: "write", Path: "/a", Syscall: "openat", Errno: "EACCES"})
	l.Add(Denial{Op: "socket", Address: "AF_INET", Syscall: "socket", Errno: "EACCES"})
	l.Add(Denial{Op: "write", Path: "/a", Syscall: "creat", Errno: "EACCES"})
	got := l.List()
	assert.Len(t, got, 2)
	assert.Equal(t, 2, got[0].Count)
	assert.Equal(t, "openat", got[0].Syscall, "first seen wins")
	assert.Equal(t, 1, got[1].Count)
}

// TestFactLogCaps: past MaxDenials distinct denials new ones are only
// counted, while the kept ones still count their repeats.
func TestFactLogCaps(t *testing.T) {
	l := NewLog()
	for i := 0; i < MaxDenials+250; i++ {
		l.Add(Denial{Op: "write", Path: fmt.Sprintf("/d/%d", i), Syscall: "openat", Errno: "EACCES"})
	}
	l.Add(Denial{Op: "write", Path: "/d/0", Syscall: "openat", Errno: "EACCES"})
	l.Add(Denial{Op: "write", Path: fmt.Sprintf("/d/%d", MaxDenials+3), Syscall: "openat", Errno: "EACCES"})
	got := l.List()
	assert.Len(t, got, MaxDenials)
	assert.Equal(t, "/d/0", got[0].Path, "first seen are kept")
	assert.Equal(t, 2, got[0].Count, "a kept denial still counts")
	assert.Equal(t, fmt.Sprintf("/d/%d", MaxDenials-1), got[MaxDenials-1].Path)
	assert.Equal(t, 251, l.Dropped(), "every denied call beyond the cap is counted")
}

func TestDenialNetwork(t *testing.T) {
	tests := []struct {
		d    Denial
		want bool
	}{
		{Denial{Op: "socket", Address: "AF_INET", Syscall: "socket"}, true},
		{Denial{Op: "connect", Address: "192.0.2.1:443", Syscall: "connect"}, true},
		{Denial{Op: "connect", Address: "[2001:db8::1]:80", Syscall: "connect"}, true},
		{Denial{Op: "send", Address: "10.0.0.53:53", Syscall: "sendto"}, true},
		{Denial{Op: "bind", Address: "0.0.0.0:8080", Syscall: "bind"}, true},
		{Denial{Op: "listen", Address: "unbound", Syscall: "listen"}, true},
		{Denial{Op: "connect", Address: "evil.example:443", Syscall: SyscallProxy}, true},
		{Denial{Op: OpResolve, Address: "evil.example", Syscall: SyscallDNS}, true},
		{Denial{Op: "connect", Path: "/run/docker.sock", Syscall: "connect"}, false},
		{Denial{Op: "connect", Address: "@abstract", Syscall: "connect"}, false},
		{Denial{Op: "bind", Address: "@x", Syscall: "bind"}, false},
		{Denial{Op: "write", Path: "/etc/passwd", Syscall: "openat"}, false},
		{Denial{Op: "ioctl", Address: "TIOCSTI", Syscall: "ioctl"}, false},
		{Denial{Op: OpLimit, Address: "memory", Syscall: "oom-kill"}, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.d.Network(), "%+v", tt.d)
	}
}
