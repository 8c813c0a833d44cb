//go:build linux

package supervisor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// TestSetIDChmod: a change of mode is routed for its set-ID bits when the
// mode register of its call (a[1] for chmod and fchmod, a[2] for the *at
// forms) asks for set-user-ID or set-group-ID; the sticky bit, other
// registers and other calls do not count.
func TestSetIDChmod(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    [6]uint64
		want bool
	}{
		{"chmod", [6]uint64{0x1000, 0o4755}, true},
		{"chmod", [6]uint64{0x1000, 0o2755}, true},
		{"chmod", [6]uint64{0x1000, 0o6777}, true},
		{"chmod", [6]uint64{0x1000, 0o1777}, false},
		{"chmod", [6]uint64{0x1000, 0o755}, false},
		{"chmod", [6]uint64{0x1000, 0o755, 0o4000}, false},
		{"chmod", [6]uint64{0x1000, 1<<32 | 0o755}, false},
		{"chmod", [6]uint64{0x1000, 1<<32 | 0o4755}, true},
		{"fchmod", [6]uint64{3, unix.S_ISUID}, true},
		{"fchmod", [6]uint64{3, unix.S_ISGID}, true},
		{"fchmod", [6]uint64{unix.S_ISUID, 0o644}, false},
		{"fchmodat", [6]uint64{3, 0x1000, 0o4755}, true},
		{"fchmodat", [6]uint64{3, 0o4755, 0o755}, false},
		{"fchmodat", [6]uint64{3, 0x1000, 0o755, unix.S_ISGID}, false},
		{"fchmodat2", [6]uint64{3, 0x1000, 0o2700, unix.AT_SYMLINK_NOFOLLOW}, true},
		{"fchmodat2", [6]uint64{3, 0x1000, 0o700, 0o6000}, false},
		{"chown", [6]uint64{0x1000, 0o4755}, false},
		{"open", [6]uint64{0x1000, unix.O_CREAT, 0o4755}, false},
		{"", [6]uint64{0o4755, 0o4755, 0o4755}, false},
	} {
		assert.Equal(t, tc.want, setIDChmod(tc.name, tc.a), "%s %#o", tc.name, tc.a)
	}
}

// TestStripSetID: a file other than a directory loses both set-ID bits, a
// directory only set-user-ID (its set-group-ID bit stays: new entries
// inherit its group); the sticky bit and the permission bits stay.
func TestStripSetID(t *testing.T) {
	for _, tc := range []struct {
		what     string
		mode     uint32
		fileMode uint32
		want     uint32
		dropped  bool
	}{
		{"file setuid", 0o4755, unix.S_IFREG, 0o755, true},
		{"file setgid", 0o2755, unix.S_IFREG, 0o755, true},
		{"file both", 0o6755, unix.S_IFREG, 0o755, true},
		{"file all", 0o7777, unix.S_IFREG | 0o644, 0o1777, true},
		{"file plain", 0o755, unix.S_IFREG, 0o755, false},
		{"file sticky", 0o1644, unix.S_IFREG, 0o1644, false},
		{"dir setgid", 0o2775, unix.S_IFDIR, 0o2775, false},
		{"dir setuid", 0o4755, unix.S_IFDIR, 0o755, true},
		{"dir both", 0o6755, unix.S_IFDIR | 0o755, 0o2755, true},
		{"dir sticky", 0o1777, unix.S_IFDIR, 0o1777, false},
		{"symlink both", 0o6777, unix.S_IFLNK, 0o777, true},
		{"fifo setgid", 0o2600, unix.S_IFIFO, 0o600, true},
		{"no type", 0o6755, 0, 0o755, true},
		{"zero", 0, unix.S_IFREG, 0, false},
	} {
		mode := tc.mode
		assert.Equal(t, tc.dropped, stripSetID(&mode, tc.fileMode), tc.what)
		assert.Equal(t, tc.want, mode, "%s: %#o", tc.what, mode)
	}
}

// TestSetIDFact: set-ID bits left out of a change of mode leave a chmod
// fact with EPERM and the reason, whichever call made it.
func TestSetIDFact(t *testing.T) {
	for _, tc := range []struct {
		rule seccomp.Rule
		path string
	}{
		{seccomp.Rule{Name: "chmod", Op: "chmod"}, "/w/x"},
		{seccomp.Rule{Name: "fchmodat2", Op: "metadata"}, "/w/dir"},
		{seccomp.Rule{Name: "fchmod"}, ""},
	} {
		assert.Equal(t, &facts.Denial{Op: "chmod", Path: tc.path, Syscall: tc.rule.Name, Errno: "EPERM", Reason: "set-ID bits not applied"},
			setIDFact(tc.rule, tc.path), tc.rule.Name)
	}
}
