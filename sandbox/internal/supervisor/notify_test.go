//go:build linux

package supervisor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// TestOpenGuardFor: a mount view leaves only openat2 to the guard; without
// one the guard refuses access mode 3 and emulates metadata changes, and
// truncation only below Landlock ABI 3 (which has LANDLOCK_ACCESS_FS_TRUNCATE).
func TestOpenGuardFor(t *testing.T) {
	for _, tc := range []struct {
		mountView bool
		abi       int
		want      OpenGuard
	}{
		{true, 0, OpenGuard{openat2: true}},
		{true, 2, OpenGuard{openat2: true}},
		{true, 6, OpenGuard{openat2: true}},
		{false, 0, OpenGuard{ioctlOpen: true, truncate: true, openat2: true, metadata: true}},
		{false, 2, OpenGuard{ioctlOpen: true, truncate: true, openat2: true, metadata: true}},
		{false, 3, OpenGuard{ioctlOpen: true, openat2: true, metadata: true}},
		{false, 7, OpenGuard{ioctlOpen: true, openat2: true, metadata: true}},
	} {
		assert.Equal(t, tc.want, OpenGuardFor(tc.mountView, tc.abi), "mountView=%v abi=%d", tc.mountView, tc.abi)
	}
}

// TestOpenGuardOddFlags: the guard's answer to unusual open flags — O_PATH,
// O_TMPFILE, O_CREAT|O_EXCL, O_TRUNC without write access, flags in the
// upper half of the register (an int: ignored) — under the three guards a
// run can have.
func TestOpenGuardOddFlags(t *testing.T) {
	view := OpenGuardFor(true, 6)
	abi2 := OpenGuardFor(false, 2) // no view, no truncate right
	abi3 := OpenGuardFor(false, 3) // no view, truncate right
	const acc3 = seccomp.AccModeIoctl
	const high = uint64(1) << 32
	open := func(flags uint64) (string, [6]uint64) { return "open", [6]uint64{0x1000, flags, 0o644} }
	openat := func(flags uint64) (string, [6]uint64) { return "openat", [6]uint64{3, 0x1000, flags, 0o644} }
	for _, tc := range []struct {
		what             string
		name             string
		args             [6]uint64
		view, abi2, abi3 unix.Errno
	}{
		{what: "O_PATH", name: "open", args: [6]uint64{0x1000, unix.O_PATH}},
		{what: "O_PATH|O_TRUNC (access mode O_RDONLY)", name: "open", args: [6]uint64{0x1000, unix.O_PATH | unix.O_TRUNC}, abi2: unix.EACCES},
		{what: "O_RDONLY|O_TRUNC", name: "openat", args: [6]uint64{3, 0x1000, unix.O_RDONLY | unix.O_TRUNC}, abi2: unix.EACCES},
		{what: "O_WRONLY|O_TRUNC", name: "openat", args: [6]uint64{3, 0x1000, unix.O_WRONLY | unix.O_TRUNC}},
		{what: "O_RDWR|O_TRUNC", name: "openat", args: [6]uint64{3, 0x1000, unix.O_RDWR | unix.O_TRUNC}},
		{what: "O_TMPFILE|O_RDWR", name: "openat", args: [6]uint64{3, 0x1000, unix.O_TMPFILE | unix.O_RDWR}},
		{what: "O_TMPFILE|O_WRONLY|O_TRUNC", name: "openat", args: [6]uint64{3, 0x1000, unix.O_TMPFILE | unix.O_WRONLY | unix.O_TRUNC}},
		{what: "O_TMPFILE (access mode O_RDONLY, EINVAL in the kernel)", name: "openat", args: [6]uint64{3, 0x1000, unix.O_TMPFILE}},
		{what: "O_CREAT|O_EXCL", name: "openat", args: [6]uint64{3, 0x1000, unix.O_CREAT | unix.O_EXCL}},
		{what: "O_CREAT|O_EXCL|O_TRUNC, O_RDONLY", name: "openat", args: [6]uint64{3, 0x1000, unix.O_CREAT | unix.O_EXCL | unix.O_TRUNC}, abi2: unix.EACCES},
		{what: "O_CREAT|O_EXCL|O_WRONLY", name: "open", args: [6]uint64{0x1000, unix.O_CREAT | unix.O_EXCL | unix.O_WRONLY}},
		{what: "access mode 3", name: "open", args: [6]uint64{0x1000, acc3}, abi2: unix.EACCES, abi3: unix.EACCES},
		{what: "access mode 3|O_NONBLOCK", name: "openat", args: [6]uint64{3, 0x1000, acc3 | unix.O_NONBLOCK}, abi2: unix.EACCES, abi3: unix.EACCES},
		{what: "access mode 3 in the upper half", name: "open", args: [6]uint64{0x1000, acc3 << 32}},
		{what: "O_TRUNC in the upper half", name: "openat", args: [6]uint64{3, 0x1000, unix.O_TRUNC << 32}},
		{what: "O_WRONLY, garbage above", name: "openat", args: [6]uint64{3, 0x1000, high | unix.O_WRONLY | unix.O_TRUNC}},
		{what: "open: access mode 3 in the mode register", name: "open", args: [6]uint64{0x1000, unix.O_RDONLY, acc3}},
		{what: "openat: O_TRUNC in the path register", name: "openat", args: [6]uint64{3, unix.O_TRUNC, unix.O_RDONLY}},
		{what: "truncate", name: "truncate", args: [6]uint64{0x1000, 0}, abi2: unix.EACCES},
		{what: "ftruncate (not the guard's)", name: "ftruncate", args: [6]uint64{3, 0}},
		{what: "creat (O_WRONLY|O_TRUNC)", name: "creat", args: [6]uint64{0x1000, acc3}},
		{what: "openat2", name: "openat2", args: [6]uint64{3, 0x1000, 0x2000, 24}, view: unix.ENOSYS, abi2: unix.ENOSYS, abi3: unix.ENOSYS},
		{what: "no name", name: "", args: [6]uint64{0x1000, acc3 | unix.O_TRUNC}},
	} {
		assert.Equal(t, tc.view, view.refuses(tc.name, tc.args), "mount view: %s", tc.what)
		assert.Equal(t, tc.abi2, abi2.refuses(tc.name, tc.args), "abi 2: %s", tc.what)
		assert.Equal(t, tc.abi3, abi3.refuses(tc.name, tc.args), "abi 3: %s", tc.what)
	}
	// open and openat read their flags from different registers.
	name, a := open(unix.O_RDONLY | unix.O_TRUNC)
	assert.Equal(t, unix.EACCES, abi2.refuses(name, a))
	name, a = openat(unix.O_RDONLY | unix.O_TRUNC)
	assert.Equal(t, unix.EACCES, abi2.refuses(name, a))
}

// TestErrnoName: a denial names its errno as the kernel headers do, and a
// number without a name by its value.
func TestErrnoName(t *testing.T) {
	for _, tc := range []struct {
		errno unix.Errno
		want  string
	}{
		{unix.EACCES, "EACCES"},
		{unix.EPERM, "EPERM"},
		{unix.EROFS, "EROFS"},
		{unix.ENOENT, "ENOENT"},
		{unix.EXDEV, "EXDEV"},
		{unix.EBUSY, "EBUSY"},
		{unix.EINVAL, "EINVAL"},
		{unix.ECONNREFUSED, "ECONNREFUSED"},
		{unix.ENOSYS, "ENOSYS"},
		{0, "errno 0"},
		{4095, "errno 4095"},
	} {
		assert.Equal(t, tc.want, errnoName(tc.errno), "%d", int(tc.errno))
	}
}

// TestFamilyName: the socket domain of a refused socket(), of which only
// the low 32 bits count.
func TestFamilyName(t *testing.T) {
	for _, tc := range []struct {
		domain uint64
		want   string
	}{
		{unix.AF_INET, "AF_INET"},
		{unix.AF_INET6, "AF_INET6"},
		{unix.AF_UNIX, "AF_UNIX"},
		{unix.AF_NETLINK, "AF_NETLINK"},
		{unix.AF_PACKET, "AF_PACKET"},
		{unix.AF_UNSPEC, "AF_UNSPEC"},
		{1<<32 | unix.AF_INET6, "AF_INET6"},
		{1 << 32, "AF_UNSPEC"},
		{45, "AF_45"},
		{0xffffffff, "AF_4294967295"},
		{0xffffffff_ffffffff, "AF_4294967295"},
	} {
		assert.Equal(t, tc.want, familyName(tc.domain), "%#x", tc.domain)
	}
}

// TestIoctlName: the request of a refused ioctl, of which only the low 32
// bits count for the name.
func TestIoctlName(t *testing.T) {
	for _, tc := range []struct {
		req  uint64
		want string
	}{
		{unix.TIOCSTI, "TIOCSTI"},
		{unix.TIOCLINUX, "TIOCLINUX"},
		{seccomp.UserfaultfdIocNew, "USERFAULTFD_IOC_NEW"},
		{1<<32 | unix.TIOCSTI, "TIOCSTI"},
		{unix.TCGETS, "0x5401"},
		{1<<32 | unix.TCGETS, "0x100005401"},
		{0, "0x0"},
	} {
		assert.Equal(t, tc.want, ioctlName(tc.req), "%#x", tc.req)
	}
}

// TestAbstractName: an abstract socket name (after its leading NUL) as
// "@name", the NUL padding of a fixed-length name dropped.
func TestAbstractName(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"ssh-agent", "@ssh-agent"},
		{"x\x00\x00\x00", "@x"},
		{"", "@"},
		{"\x00", "@"},
		{"a\x00b", "@a\x00b"},
		{"\x00lead", "@\x00lead"},
	} {
		assert.Equal(t, tc.want, abstractName([]byte(tc.name)), "%q", tc.name)
	}
}

// TestDenyAndAllow: a denial answers with its errno and a fact naming the
// rule's op and call, its path or address and the errno; allow continues
// the call without a fact; unemulated is an EACCES denial saying why.
func TestDenyAndAllow(t *testing.T) {
	n := &Notifier{}
	for _, tc := range []struct {
		rule        seccomp.Rule
		errno       unix.Errno
		path, addr  string
		wantErrname string
	}{
		{seccomp.Rule{Name: "openat", Op: "write"}, unix.EACCES, "/etc/passwd", "", "EACCES"},
		{seccomp.Rule{Name: "mkdir", Op: "write"}, unix.EROFS, "/usr/x", "", "EROFS"},
		{seccomp.Rule{Name: "link", Op: "link"}, unix.EXDEV, "/etc/shadow", "", "EXDEV"},
		{seccomp.Rule{Name: "rmdir", Op: "remove"}, unix.EBUSY, "/w/.git", "", "EBUSY"},
		{seccomp.Rule{Name: "connect", Op: "connect"}, unix.EPERM, "", "@ssh-agent", "EPERM"},
		{seccomp.Rule{Name: "socket", Op: "socket"}, unix.EAFNOSUPPORT, "", "AF_PACKET", "EAFNOSUPPORT"},
		{seccomp.Rule{Name: "kill", Op: "signal"}, unix.EPERM, "", "pid 1", "EPERM"},
	} {
		v := n.deny(tc.rule, tc.errno, tc.path, tc.addr)
		assert.False(t, v.cont, tc.rule.Name)
		assert.False(t, v.abandon, tc.rule.Name)
		assert.Equal(t, tc.errno, v.errno, tc.rule.Name)
		assert.Equal(t, &facts.Denial{Op: tc.rule.Op, Path: tc.path, Address: tc.addr, Syscall: tc.rule.Name, Errno: tc.wantErrname}, v.fact, tc.rule.Name)
	}
	assert.Equal(t, verdict{cont: true}, allow())
	v := n.unemulated(seccomp.Rule{Name: "bind", Op: "bind"}, "/tmp/s", "", "a socket cannot be bound")
	assert.Equal(t, unix.EACCES, v.errno)
	assert.Equal(t, &facts.Denial{Op: "bind", Path: "/tmp/s", Syscall: "bind", Errno: "EACCES", Reason: reasonNoGetfd + "a socket cannot be bound"}, v.fact)
}

// TestPinsProtected: a remove or rename of p is refused (EBUSY) when p is a
// strict ancestor of a protected path; the protected path itself, what lies
// beneath it, and siblings sharing a prefix are not ancestors. Paths are
// canonical: "/w/" is no spelling of the workspace there, and is no ancestor.
func TestPinsProtected(t *testing.T) {
	n := &Notifier{policy: modes.Policy{Protected: []string{"/w/.git/config", "/w/.envrc", "/w/a/b"}}}
	for _, tc := range []struct {
		p    string
		want bool
	}{
		{"/", true},
		{"/w", true},
		{"/w/.git", true},
		{"/w/a", true},
		{"/w/.git/config", false},
		{"/w/.git/config/x", false},
		{"/w/.envrc", false},
		{"/w/.gi", false},
		{"/w/.gitx", false},
		{"/w/.git/conf", false},
		{"/w/a/bc", false},
		{"/w/a/b/c", false},
		{"/ww", false},
		{"/x", false},
		{"/w/", false},
		{"", true}, // never canonical: counts as the root (refused, never let through)
	} {
		assert.Equal(t, tc.want, n.pinsProtected(tc.p), tc.p)
	}
	none := &Notifier{}
	assert.False(t, none.pinsProtected("/"), "no protected path")
}
