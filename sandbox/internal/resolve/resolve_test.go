//go:build linux

package resolve

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestResolveOwnProcess(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "real/sub"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "abs")))
	require.NoError(t, os.Symlink("real/sub", filepath.Join(dir, "rel")))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "real/sub/out")))
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.NoError(t, os.Chdir(dir))
	t.Cleanup(func() { os.Chdir(wd) })

	rootfd, err := OpenRoot(os.Getpid())
	require.NoError(t, err)
	defer unix.Close(rootfd)
	tg := &Target{PID: os.Getpid(), RootFD: rootfd}
	for _, tc := range []struct {
		p      string
		follow bool
		want   string
	}{
		{"abs/sub/new.txt", true, filepath.Join(dir, "real/sub/new.txt")},
		{"rel/../sub/./x", true, filepath.Join(dir, "real/sub/x")},
		{"rel/out", true, "/etc/passwd"},
		{"rel/out", false, filepath.Join(dir, "real/sub/out")},
		{"/proc/self/root" + dir + "/abs", true, filepath.Join(dir, "real")},
		{"/proc/self/cwd/rel", true, filepath.Join(dir, "real/sub")},
	} {
		got, err := tg.Resolve(unix.AT_FDCWD, tc.p, tc.follow)
		if assert.NoError(t, err, tc.p) {
			assert.Equal(t, tc.want, got, tc.p)
		}
	}
	_, err = tg.Resolve(unix.AT_FDCWD, "missing/dir/file", true)
	assert.ErrorIs(t, err, unix.ENOENT)
	_, err = tg.Resolve(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(os.Stdin.Fd())), true)
	if err != nil {
		assert.ErrorIs(t, err, errUnsure)
	}
	entry, err := tg.ResolveEntry(unix.AT_FDCWD, "rel/out")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "real/sub/out"), entry, "entries keep their last component")
}

func TestReadString(t *testing.T) {
	b := []byte("/some/path\x00junk")
	s, err := ReadString(os.Getpid(), uint64(uintptrOf(&b[0])), 4096)
	require.NoError(t, err)
	assert.Equal(t, "/some/path", s)
	_, err = ReadString(os.Getpid(), 0, 10)
	assert.Error(t, err)
}
