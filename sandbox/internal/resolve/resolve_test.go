//go:build linux

package resolve

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// ownTarget is this test process seen as a Target, its root open until
// the test ends.
func ownTarget(t testing.TB) *Target {
	rootfd, err := OpenRoot(os.Getpid())
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(rootfd) })
	return &Target{PID: os.Getpid(), RootFD: rootfd}
}

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

	tg := ownTarget(t)
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

// TestResolveFDError: a magic link of the target's own descriptor to what
// has no path is an *FDError naming the descriptor (as the last component
// only); anything else that cannot be judged stays a plain unsure error.
func TestResolveFDError(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	dir := t.TempDir()
	gone, err := os.Create(filepath.Join(dir, "gone"))
	require.NoError(t, err)
	defer gone.Close()
	require.NoError(t, os.Remove(gone.Name()))
	tg := ownTarget(t)
	for _, tc := range []struct {
		p  string
		fd int // -1: not an *FDError
	}{
		{"/proc/self/fd/" + strconv.Itoa(int(r.Fd())), int(r.Fd())},
		{"/dev/fd/" + strconv.Itoa(int(w.Fd())), int(w.Fd())},
		{"/proc/thread-self/fd/" + strconv.Itoa(int(gone.Fd())), int(gone.Fd())},
		{"/proc/self/fd/" + strconv.Itoa(int(r.Fd())) + "/x", -1}, // not the last component
	} {
		_, err := tg.Resolve(unix.AT_FDCWD, tc.p, true)
		require.Error(t, err, tc.p)
		assert.True(t, Unsure(err), "%s: %v", tc.p, err)
		var fe *FDError
		if tc.fd < 0 {
			assert.False(t, errors.As(err, &fe), tc.p)
			continue
		}
		if assert.ErrorAs(t, err, &fe, tc.p) {
			assert.Equal(t, &FDError{FD: tc.fd, Own: true}, fe, tc.p)
		}
	}
}

func TestReadPath(t *testing.T) {
	b := []byte("/some/path\x00junk")
	tg := &Target{PID: os.Getpid()}
	s, err := tg.ReadPath(uint64(uintptrOf(&b[0])))
	require.NoError(t, err)
	assert.Equal(t, "/some/path", s)
	_, err = tg.ReadPath(0)
	assert.Error(t, err)
}

// TestDirectAgreesWithWalk checks the one-openat2 fast path against the
// component walk it short-cuts: for every path it settles, the walk gives
// the same canonical path; paths it must not settle (symlinks, "..",
// /proc, missing parents) are left to the walk.
func TestDirectAgreesWithWalk(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	for _, d := range []string{"a/b/c", "x", "proc"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a/b/c/f"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o644))
	require.NoError(t, os.Symlink("a/b", filepath.Join(dir, "lnk")))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "a/b/c/out")))
	require.NoError(t, os.Symlink("missing", filepath.Join(dir, "a/dangling")))

	tg := ownTarget(t)

	for _, tc := range []struct {
		p      string
		direct bool // the fast path settles it
	}{
		{"a/b/c/f", true},
		{"a/b/c/new", true},
		{"a//b/./c/", true},
		{"a/b/c/f/", true},
		{"file", true},
		{"file/x", false}, // ENOTDIR: the walk says what it says
		{"proc/x", true},  // a directory called proc, not /proc
		{"", true},        // the directory itself
		{"a/b/c/out", false},
		{"a/dangling", false},
		{"lnk/c/f", false},
		{"lnk/c/new", false},
		{"a/b/../b/c/f", false},
		{"a/..", false},
		{"missing/x", false},
		{"a/missing/x", false},
		{"/proc/self/status", false},
		{"/proc", false},
		{"/", true},
	} {
		for _, follow := range []bool{true, false} {
			p := tc.p
			if !strings.HasPrefix(p, "/") {
				p = dir + "/" + p
			}
			want, werr := tg.walk(p, follow)
			got, ok := tg.direct(p, follow)
			if ok {
				assert.NoError(t, werr, "%s follow=%v: direct settled a path the walk refuses", tc.p, follow)
				assert.Equal(t, want, got, "%s follow=%v", tc.p, follow)
			}
			// A final symlink is the walk's only when followed.
			settles := tc.direct || (!follow && (tc.p == "a/b/c/out" || tc.p == "a/dangling"))
			assert.Equal(t, settles, ok, "%s follow=%v: direct settled it", tc.p, follow)
			r, rerr := tg.Resolve(unix.AT_FDCWD, p, follow)
			assert.Equal(t, want, r, "%s follow=%v: Resolve", tc.p, follow)
			assert.Equal(t, werr, rerr, "%s follow=%v: Resolve's error", tc.p, follow)
		}
	}
}

// BenchmarkResolve compares the fast path with the walk on a path of a
// typical depth that does not exist yet (a file being created).
func BenchmarkResolve(b *testing.B) {
	dir, err := filepath.EvalSymlinks(b.TempDir())
	require.NoError(b, err)
	require.NoError(b, os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755))
	tg := ownTarget(b)
	p := dir + "/a/b/c/new"
	b.Run("walk", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := tg.walk(p, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("resolve", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := tg.Resolve(unix.AT_FDCWD, p, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
