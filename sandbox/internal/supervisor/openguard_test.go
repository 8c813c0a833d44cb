//go:build linux

package supervisor

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// TestOpenGuard: what the notifier refuses from the registers alone, per
// mount view and Landlock ABI. It must match the kernel rules of a filter
// without notification (seccomp.Spec.DenyTruncate / DenyIoctlOpen).
func TestOpenGuard(t *testing.T) {
	const garbage = 0xdead_beef_0000_0000
	tr := uint64(unix.O_TRUNC)
	ioctl := uint64(seccomp.AccModeIoctl)
	type call struct {
		name string
		args [6]uint64
	}
	open := func(flags uint64) call { return call{"open", [6]uint64{0x1000, flags}} }
	openat := func(flags uint64) call { return call{"openat", [6]uint64{3, 0x1000, flags}} }
	calls := map[string]call{
		"open O_RDONLY":              open(unix.O_RDONLY),
		"open O_WRONLY":              open(unix.O_WRONLY),
		"open O_RDWR":                open(unix.O_RDWR),
		"open 3":                     open(ioctl),
		"open 3|garbage":             open(ioctl | garbage),
		"open O_RDONLY|O_TRUNC":      open(unix.O_RDONLY | tr),
		"open O_WRONLY|O_TRUNC":      open(unix.O_WRONLY | tr),
		"open O_RDWR|O_TRUNC":        open(unix.O_RDWR | tr),
		"open 3|O_TRUNC":             open(ioctl | tr),
		"openat 3":                   openat(ioctl),
		"openat O_RDONLY|O_TRUNC":    openat(unix.O_RDONLY | tr),
		"openat O_CREAT|O_TRUNC":     openat(unix.O_RDONLY | unix.O_CREAT | tr),
		"openat O_TRUNC|garbage":     openat(unix.O_RDONLY | tr | garbage),
		"openat O_WRONLY|O_TRUNC":    openat(unix.O_WRONLY | tr),
		"openat O_RDONLY|garbage":    openat(unix.O_RDONLY | garbage),
		"openat O_PATH|O_TRUNC":      openat(unix.O_PATH | tr),
		"openat O_RDWR|O_CREAT":      openat(unix.O_RDWR | unix.O_CREAT),
		"truncate":                   {"truncate", [6]uint64{0x1000, 0}},
		"openat2":                    {"openat2", [6]uint64{3, 0x1000, 0x2000, 24}},
		"creat (O_WRONLY|O_TRUNC)":   {"creat", [6]uint64{0x1000, 0o644}},
		"mkdir (not an open)":        {"mkdir", [6]uint64{0x1000, 0o755}},
		"openat, flags in dirfd arg": {"openat", [6]uint64{ioctl, 0x1000, unix.O_RDONLY}},
	}
	noViewTrunc := map[string]unix.Errno{
		"open O_RDONLY|O_TRUNC": unix.EACCES, "open 3|O_TRUNC": unix.EACCES, "openat O_RDONLY|O_TRUNC": unix.EACCES,
		"openat O_CREAT|O_TRUNC": unix.EACCES, "openat O_TRUNC|garbage": unix.EACCES, "openat O_PATH|O_TRUNC": unix.EACCES,
		"truncate": unix.EACCES,
	}
	noViewIoctl := map[string]unix.Errno{
		"open 3": unix.EACCES, "open 3|garbage": unix.EACCES, "open 3|O_TRUNC": unix.EACCES, "openat 3": unix.EACCES,
		"openat2": unix.ENOSYS,
	}
	openat2Only := map[string]unix.Errno{"openat2": unix.ENOSYS}
	union := func(ms ...map[string]unix.Errno) map[string]unix.Errno {
		out := map[string]unix.Errno{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	for _, tc := range []struct {
		mountView bool
		abi       int
		want      map[string]unix.Errno // every other call: 0 (judged as before)
	}{
		// openat2 answers ENOSYS with a mount view too: its mode could
		// carry set-ID bits no race-free decision can see (setid_linux.go).
		{true, 7, openat2Only},
		{true, 2, openat2Only},
		{true, 0, openat2Only},
		{false, 7, noViewIoctl},
		{false, 3, noViewIoctl},
		{false, 2, union(noViewIoctl, noViewTrunc)},
		{false, 1, union(noViewIoctl, noViewTrunc)},
		{false, 0, union(noViewIoctl, noViewTrunc)},
	} {
		t.Run(fmt.Sprintf("mountview=%v/abi=%d", tc.mountView, tc.abi), func(t *testing.T) {
			g := OpenGuardFor(tc.mountView, tc.abi)
			for name, c := range calls {
				assert.Equal(t, tc.want[name], g.refuses(c.name, c.args), name)
			}
		})
	}
}
