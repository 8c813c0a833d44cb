//go:build linux

package supervisor

import (
	"errors"
	"fmt"
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

// TestMetaRefusesBoundaries: prefixes are matched by path component (a
// sibling sharing a root's, a protected path's or a secret's prefix is not
// inside it), a writable root beneath a hidden directory is not hidden, and
// /proc's global entries are refused while a process's own are the
// kernel's.
func TestMetaRefusesBoundaries(t *testing.T) {
	n := &Notifier{policy: modes.Policy{
		Mode:          modes.WorkspaceWrite,
		Workspace:     "/w",
		WritableRoots: []string{"/w", "/tmp", "/home/u/.cache/go-build"},
		Protected:     []string{"/w/.envrc"},
		DenyRead:      []string{"/w/secret", "/home/u/.cache"},
	}}
	for _, tc := range []struct {
		path string
		want unix.Errno
	}{
		{"/", unix.EROFS},
		{"/wx", unix.EROFS},
		{"/w/.envrcx", 0},
		{"/w/.envrc/x", unix.EROFS},
		{"/w/secretx", 0},
		{"/w/secret", unix.EROFS},
		{"/w/secret/a/b", unix.ENOENT},
		{"/tmpx/a", unix.EROFS},
		{"/home/u/.cache", unix.EROFS},
		{"/home/u/.cache/pip/x", unix.ENOENT},
		{"/home/u/.cache/go-build", 0},
		{"/home/u/.cache/go-build/ab/cd", 0},
		{"/home/u/.cache/go-buildx", unix.ENOENT},
		{"/dev/zero", unix.EROFS},
		{"/dev/pts/0", unix.EROFS},
		{"/proc", unix.EROFS},
		{"/proc/sys", unix.EROFS},
		{"/proc/self", unix.EROFS}, // not canonical (the resolver gives the pid)
		{"/proc/1", 0},
		{"/proc/1/attr/current", 0},
		{"/procx", unix.EROFS},
	} {
		assert.Equal(t, tc.want, n.metaRefuses(tc.path), tc.path)
	}
}

// TestMasks: a path is hidden at or beneath a deny-read path, unless it
// lies in a writable root that is itself beneath one (a cache's upper
// layer); a sibling sharing the prefix is not hidden.
func TestMasks(t *testing.T) {
	n := &Notifier{policy: modes.Policy{
		WritableRoots: []string{"/w", "/home/u/.cache/go-build"},
		DenyRead:      []string{"/home/u/.ssh", "/home/u/.cache"},
	}}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/home/u/.ssh", true},
		{"/home/u/.ssh/id_ed25519", true},
		{"/home/u/.sshx", false},
		{"/home/u", false},
		{"/", false},
		{"/home/u/.cache", true},
		{"/home/u/.cache/pip", true},
		{"/home/u/.cache/go-build", false},
		{"/home/u/.cache/go-build/ab", false},
		{"/home/u/.cache/go-buildx", true},
		{"/w/x", false},
	} {
		assert.Equal(t, tc.want, n.masks(tc.path), tc.path)
	}
}

// TestDecodeMetaRegisters: what decodeMeta decides from the registers
// alone, before it reads the command's memory (the target is nil here, so
// nothing is read): the calls by descriptor, and the errnos the kernel
// gives first — EINVAL for flags a call does not take (only the low 32
// bits count), EINVAL for futimens with flags, ENOSYS for a call that is
// not a metadata change.
func TestDecodeMetaRegisters(t *testing.T) {
	const cwd = uint64(0xffffff9c) // AT_FDCWD as an int register
	for _, tc := range []struct {
		what  string
		name  string
		a     [6]uint64
		want  metaCall // when errno is 0
		errno unix.Errno
	}{
		{"fchmod", "fchmod", [6]uint64{3, 0o644}, metaCall{kind: metaChmod, byFD: true, fd: 3, follow: true, mode: 0o644}, 0},
		{"fchmod, upper halves", "fchmod", [6]uint64{1<<32 | 4, 1<<32 | 0o4755}, metaCall{kind: metaChmod, byFD: true, fd: 4, follow: true, mode: 0o4755}, 0},
		{"fchmod AT_FDCWD", "fchmod", [6]uint64{cwd, 0o600}, metaCall{kind: metaChmod, byFD: true, fd: unix.AT_FDCWD, follow: true, mode: 0o600}, 0},
		{"fchown", "fchown", [6]uint64{3, 1000, 0xffffffff}, metaCall{kind: metaChown, byFD: true, fd: 3, follow: true, uid: 1000, gid: ^uint32(0)}, 0},
		{"fchown, upper halves", "fchown", [6]uint64{3, 1<<32 | 5, 1<<33 | 7}, metaCall{kind: metaChown, byFD: true, fd: 3, follow: true, uid: 5, gid: 7}, 0},
		{"futimens", "utimensat", [6]uint64{3, 0, 0, 0}, metaCall{kind: metaUtimes, byFD: true, fd: 3, follow: true}, 0},
		{"futimens, flags in the upper half", "utimensat", [6]uint64{3, 0, 0, 1 << 32}, metaCall{kind: metaUtimes, byFD: true, fd: 3, follow: true}, 0},
		{"futimesat NULL path", "futimesat", [6]uint64{5, 0, 0}, metaCall{kind: metaUtimes, byFD: true, fd: 5, follow: true}, 0},
		{"futimens AT_SYMLINK_NOFOLLOW", "utimensat", [6]uint64{3, 0, 0, unix.AT_SYMLINK_NOFOLLOW}, metaCall{}, unix.EINVAL},
		{"futimens AT_EMPTY_PATH", "utimensat", [6]uint64{3, 0, 0, unix.AT_EMPTY_PATH}, metaCall{}, unix.EINVAL},
		{"utimensat AT_REMOVEDIR", "utimensat", [6]uint64{3, 0x1000, 0, unix.AT_REMOVEDIR}, metaCall{}, unix.EINVAL},
		{"fchmodat2 AT_REMOVEDIR", "fchmodat2", [6]uint64{3, 0x1000, 0o644, unix.AT_REMOVEDIR}, metaCall{}, unix.EINVAL},
		{"fchmodat2 AT_SYMLINK_FOLLOW", "fchmodat2", [6]uint64{3, 0x1000, 0o644, unix.AT_SYMLINK_FOLLOW}, metaCall{}, unix.EINVAL},
		{"fchownat AT_SYMLINK_FOLLOW", "fchownat", [6]uint64{3, 0x1000, 0, 0, unix.AT_SYMLINK_FOLLOW}, metaCall{}, unix.EINVAL},
		{"fchownat AT_NO_AUTOMOUNT", "fchownat", [6]uint64{3, 0x1000, 0, 0, unix.AT_NO_AUTOMOUNT}, metaCall{}, unix.EINVAL},
		{"fsetxattr flags 4", "fsetxattr", [6]uint64{3, 0x1000, 0x2000, 1, 4}, metaCall{}, unix.EINVAL},
		{"setxattr flags above", "setxattr", [6]uint64{0x1000, 0x2000, 0x3000, 1, unix.XATTR_CREATE | 8}, metaCall{}, unix.EINVAL},
		{"lsetxattr", "lsetxattr", [6]uint64{0x1000, 0x2000, 0x3000, 1, 0x100}, metaCall{}, unix.EINVAL},
		{"fchmodat3", "fchmodat3", [6]uint64{3, 0x1000, 0o644}, metaCall{}, unix.ENOSYS},
		{"truncate", "truncate", [6]uint64{0x1000}, metaCall{}, unix.ENOSYS},
		{"no name", "", [6]uint64{}, metaCall{}, unix.ENOSYS},
	} {
		c, errno := decodeMeta(nil, tc.name, tc.a)
		assert.Equal(t, tc.errno, errno, tc.what)
		if tc.errno == 0 {
			assert.Equal(t, tc.want, c, tc.what)
		}
	}
}

// TestErrnoOf: an error's errno, wrapped or not; def for one without.
func TestErrnoOf(t *testing.T) {
	for _, tc := range []struct {
		what string
		err  error
		def  unix.Errno
		want unix.Errno
	}{
		{"nil", nil, unix.EFAULT, unix.EFAULT},
		{"errno", unix.ENAMETOOLONG, unix.EFAULT, unix.ENAMETOOLONG},
		{"wrapped", fmt.Errorf("read path: %w", unix.ENOENT), unix.EFAULT, unix.ENOENT},
		{"path error", &os.PathError{Op: "open", Path: "/x", Err: unix.ELOOP}, unix.EIO, unix.ELOOP},
		{"no errno", errors.New("short"), unix.EIO, unix.EIO},
	} {
		assert.Equal(t, tc.want, errnoOf(tc.err, tc.def), tc.what)
	}
}
