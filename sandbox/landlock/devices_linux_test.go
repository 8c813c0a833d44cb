//go:build linux

package landlock

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// TestNoReadOnDevices: the ruleset grants no file right on /, on /dev, on
// the host's /dev/pts or on any devpts/devtmpfs mount, and grants the device
// nodes a command needs one by one.
func TestNoReadOnDevices(t *testing.T) {
	rs := ForABI(modes.Policy{Mode: modes.WorkspaceWrite, Workspace: "/tmp", WritableRoots: []string{"/tmp"}}, 7)
	got := map[string]uint64{}
	for _, r := range rs.rules {
		got[r.path] |= r.access
	}
	assert.Equal(t, uint64(unix.LANDLOCK_ACCESS_FS_READ_DIR), got["/"], "/ is only listable")
	devMounts, others := deviceMounts(nil)
	for _, p := range append([]string{"/dev", "/dev/pts", "/dev/console", "/dev/tty1", "/dev/vcs"}, devMounts...) {
		_, ok := got[p]
		assert.False(t, ok, "%s has a rule", p)
	}
	for r := range got {
		for _, x := range append([]string{"/dev"}, devMounts...) {
			if modes.Within(x, r) && r != "/" {
				t.Errorf("rule on %s covers the device subtree %s", r, x)
			}
		}
	}
	for _, d := range []string{"/dev/null", "/dev/zero", "/dev/full"} {
		assert.NotZero(t, got[d]&unix.LANDLOCK_ACCESS_FS_WRITE_FILE, d)
	}
	for _, d := range []string{"/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx"} {
		assert.NotZero(t, got[d]&unix.LANDLOCK_ACCESS_FS_READ_FILE, d)
	}
	for _, d := range []string{"/usr", "/etc", "/proc"} {
		assert.Equal(t, uint64(fsRead), got[d], d)
	}
	for _, m := range others {
		assert.NotZero(t, got[m]&unix.LANDLOCK_ACCESS_FS_READ_FILE, m)
	}
	assert.NotZero(t, got["/tmp"]&unix.LANDLOCK_ACCESS_FS_WRITE_FILE)
}

func TestGrantBeneath(t *testing.T) {
	d := t.TempDir()
	for _, p := range []string{"a/b/dev/x", "a/b/c", "a/e", "f"} {
		require.NoError(t, os.MkdirAll(filepath.Join(d, p), 0o755))
	}
	require.NoError(t, os.Symlink("a", filepath.Join(d, "link")))
	require.NoError(t, os.WriteFile(filepath.Join(d, "a/file"), nil, 0o644))
	var out []rule
	grantBeneath(nil, d, kindDir, []string{filepath.Join(d, "a/b/dev")}, fsRead, &out)
	kinds := map[string]kind{}
	for _, r := range out {
		assert.Equal(t, uint64(fsRead), r.access)
		kinds[r.path] = r.kind
	}
	assert.Equal(t, map[string]kind{
		filepath.Join(d, "a/b/c"): kindDir, filepath.Join(d, "a/e"): kindDir, filepath.Join(d, "f"): kindDir,
		filepath.Join(d, "a/file"): kindOther,
	}, kinds, "the listed entries, with the type the listing gave (no symlink)")
	out = nil
	grantBeneath(nil, filepath.Join(d, "a/b/dev/x"), kindUnknown, []string{filepath.Join(d, "a/b/dev")}, fsRead, &out)
	assert.Equal(t, []rule{{path: filepath.Join(d, "a/b/dev/x"), access: fsRead}}, out, "a root inside an excluded subtree is granted whole")
}

func TestMountAccessOf(t *testing.T) {
	a := MountAccessOf(7)
	assert.Equal(t, uint64(fsRead), a.Read)
	assert.NotZero(t, a.Pty&unix.LANDLOCK_ACCESS_FS_WRITE_FILE)
	assert.NotZero(t, a.Pty&unix.LANDLOCK_ACCESS_FS_IOCTL_DEV)
	assert.Zero(t, a.Pty&unix.LANDLOCK_ACCESS_FS_EXECUTE)
	assert.Zero(t, MountAccessOf(4).Pty&unix.LANDLOCK_ACCESS_FS_IOCTL_DEV, "ABI 4 has no IOCTL_DEV")
}
