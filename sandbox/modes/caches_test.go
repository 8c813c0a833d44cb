package modes

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeriveCaches: under workspace-write the caches of the command's home
// that exist, whose parent does, or that lie in ~/.cache are overlaid, with
// the store beneath the state directory; a cache in or around a writable
// root is not; --no-caches and the other modes have none; a store given in
// a writable root or relative is refused, the default one in a writable
// home silently gives none.
func TestDeriveCaches(t *testing.T) {
	// Outside /tmp, a writable root.
	home, err := os.MkdirTemp("/var/tmp", "dsh-modes-home-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	home, err = filepath.EvalSymlinks(home)
	require.NoError(t, err)
	t.Setenv("HOME", home) // this process's home: the only one with caches
	for _, d := range []string{".npm", "go/pkg", ".cargo/bin"} {
		require.NoError(t, os.MkdirAll(filepath.Join(home, d), 0o755))
	}
	ws := t.TempDir()
	derive := func(o Options) (Policy, error) {
		o.Workspace, o.CacheHome, o.Homes = ws, home, []string{home}
		return Derive(o)
	}
	p, err := derive(Options{Mode: WorkspaceWrite})
	require.NoError(t, err)
	in := func(rel ...string) []string {
		var out []string
		for _, r := range rel {
			out = append(out, filepath.Join(home, r))
		}
		return out
	}
	assert.Equal(t, in(".cache/go-build", "go/pkg/mod", ".npm", ".cache/yarn", ".cache/pnpm", ".cache/pip", ".cache/uv", ".cargo/registry", ".cargo/git"), p.Caches,
		"existing, parent existing, or in ~/.cache; never a bin directory")
	assert.Equal(t, filepath.Join(home, HomeCacheDir), p.CacheDir)
	require.NoError(t, p.Validate())

	for _, c := range []struct {
		name string
		o    Options
	}{
		{"no caches", Options{Mode: WorkspaceWrite, NoCaches: true}},
		{"read-only", Options{Mode: ReadOnly}},
		{"a writable home", Options{Mode: WorkspaceWrite, AllowWrite: []string{home}, AllowBroadWorkspace: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := derive(c.o)
			require.NoError(t, err)
			assert.Empty(t, p.Caches)
			assert.Empty(t, p.CacheDir)
		})
	}
	t.Run("a cache in a writable root", func(t *testing.T) {
		p, err := derive(Options{Mode: WorkspaceWrite, AllowWrite: []string{filepath.Join(home, ".npm")}})
		require.NoError(t, err)
		assert.NotContains(t, p.Caches, filepath.Join(home, ".npm"))
		assert.Contains(t, p.Caches, filepath.Join(home, ".cache/go-build"))
	})
	for _, c := range []struct{ store, want string }{
		{filepath.Join(ws, "store"), "lies in the writable root"},
		{"store", "is not an absolute path"},
	} {
		_, err := derive(Options{Mode: WorkspaceWrite, CacheDir: c.store})
		require.ErrorIs(t, err, ErrCacheDir)
		assert.ErrorContains(t, err, c.want)
	}
	t.Run("a hand-built policy", func(t *testing.T) {
		bad := p
		bad.CacheDir = ws
		assert.ErrorIs(t, bad.Validate(), ErrInvalidPolicy)
		bad = p
		bad.Caches = append([]string{ws}, bad.Caches...)
		assert.ErrorIs(t, bad.Validate(), ErrInvalidPolicy)
		bad = p
		bad.Mode = ReadOnly
		bad.WritableRoots = nil
		assert.ErrorIs(t, bad.Validate(), ErrInvalidPolicy)
	})
}

// TestDeriveCachesOnlyOwnHome: a command's $HOME that is not a home of
// this process's user (a request pointing it at /etc, say) has no caches:
// nothing is made there.
func TestDeriveCachesOnlyOwnHome(t *testing.T) {
	ws := t.TempDir()
	other, err := os.MkdirTemp("/var/tmp", "dsh-modes-other-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(other) })
	p, err := Derive(Options{Mode: WorkspaceWrite, Workspace: ws, CacheHome: other, Homes: []string{other}})
	require.NoError(t, err)
	assert.Empty(t, p.Caches)
	assert.Empty(t, p.CacheDir)
}
