//go:build linux

package supervisor

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// TestMetaRefuses: which canonical paths the supervisor lets a command
// change the metadata of without a mount view, and with which errno it
// refuses the rest (what the mount view would answer).
func TestMetaRefuses(t *testing.T) {
	n := &Notifier{policy: modes.Policy{
		Mode:          modes.WorkspaceWrite,
		Workspace:     "/w",
		WritableRoots: []string{"/w", "/tmp"},
		Protected:     []string{"/w/.git/config", "/w/.envrc"},
		DenyRead:      []string{"/home/u/.ssh", "/w/secret"},
	}}
	for _, tc := range []struct {
		path string
		want unix.Errno
	}{
		{"/w/script.sh", 0},
		{"/w", 0},
		{"/tmp/x", 0},
		{"/w/.envrc", unix.EROFS},
		{"/w/.git/config", unix.EROFS},
		{"/w/.git/HEAD", 0},
		{"/w/secret", unix.EROFS},
		{"/w/secret/key", unix.ENOENT}, // beneath a hidden directory
		{"/home/u/.ssh", unix.EROFS},
		{"/home/u/.ssh/id_ed25519", unix.ENOENT},
		{"/home/u/.bashrc", unix.EROFS},
		{"/etc/passwd", unix.EROFS},
		{"/dev/null", unix.EROFS}, // a sink is writable, its mode is the host's
		{"/dev/tty", unix.EROFS},
		{"/proc", unix.EROFS},
		{"/proc/sys/kernel/hostname", unix.EROFS},
		{"/proc/kmsg", unix.EROFS},
		{"/proc/123/status", 0}, // the kernel's to refuse
	} {
		assert.Equal(t, tc.want, n.metaRefuses(tc.path), tc.path)
	}
	n.policy.Mode = modes.ReadOnly
	n.policy.WritableRoots = nil
	assert.Equal(t, unix.EROFS, n.metaRefuses("/w/script.sh"), "read-only: the workspace is no root")
}

// TestIDMap: an id the command names is mapped through its user
// namespace's map; an unmapped one is not.
func TestIDMap(t *testing.T) {
	m := idMap{{0, 1000, 1}, {1, 100000, 65536}}
	for _, tc := range []struct {
		in, out uint32
		ok      bool
	}{
		{0, 1000, true}, {1, 100000, true}, {65536, 165535, true}, {65537, 0, false},
	} {
		got, ok := m.outside(tc.in)
		assert.Equal(t, tc.ok, ok, "%d", tc.in)
		if ok {
			assert.Equal(t, tc.out, got, "%d", tc.in)
		}
	}
	all := idMap{{0, 0, ^uint32(0)}}
	got, ok := all.outside(^uint32(0) - 1)
	assert.True(t, ok)
	assert.Equal(t, ^uint32(0)-1, got)
}

// TestFDFlags: the open flags of a descriptor, O_PATH included.
func TestFDFlags(t *testing.T) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	fl, err := fdFlags(os.Getpid(), fd)
	require.NoError(t, err)
	assert.NotZero(t, fl&unix.O_PATH)
	_, err = fdFlags(os.Getpid(), 1<<20)
	assert.Error(t, err)
}

// TestRestrictedThread: the thread runs calls without capabilities and
// with no_new_privs, keeps its own umask per call, and refuses calls once
// stopped.
func TestRestrictedThread(t *testing.T) {
	r := &restrictedThread{ruleset: -1}
	var eff uint32
	var nnp int
	require.NoError(t, r.do(false, 0, -1, func() error {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			return err
		}
		eff = data[0].Effective | data[1].Effective
		v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
		nnp = v
		return err
	}))
	assert.Zero(t, eff, "no capabilities")
	assert.Equal(t, 1, nnp, "no_new_privs")
	var mask int
	require.NoError(t, r.do(true, 0o027, -1, func() error {
		mask = unix.Umask(0o027)
		return nil
	}))
	assert.Equal(t, 0o027, mask)
	own := unix.Umask(0o022)
	unix.Umask(own)
	assert.NotEqual(t, 0o027, own, "the process's umask is untouched")
	r.stop()
	assert.ErrorIs(t, r.do(false, 0, -1, func() error { return nil }), unix.EACCES)
}
