package cachestore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// TestOpenAndClean: Open makes the missing cache and its entry and holds
// it, so that a second command gets none of it (no two overlays share an
// upper layer) and Clean leaves it; once closed, Clean empties it — a
// directory without rights and a symlink to a file of the user's among it,
// the file untouched — and the user's cache is never written.
func TestOpenAndClean(t *testing.T) {
	home := t.TempDir()
	p := modes.Policy{Mode: modes.WorkspaceWrite, CacheDir: filepath.Join(home, modes.HomeCacheDir),
		Caches: []string{filepath.Join(home, ".cache/go-build"), filepath.Join(home, ".npm")}}
	require.NoError(t, os.MkdirAll(p.Caches[1], 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(p.Caches[1], "mine"), []byte("mine"), 0o644))

	s, layers, err := Open(p)
	require.NoError(t, err)
	require.Len(t, layers, 2)
	for i, l := range layers {
		assert.Equal(t, p.Caches[i], l.Dir)
		assert.DirExists(t, l.Dir, "made when missing")
		assert.DirExists(t, l.Upper)
		assert.DirExists(t, l.Work)
		assert.Equal(t, filepath.Dir(l.Upper), filepath.Dir(l.Work))
	}
	assert.NotEqual(t, filepath.Dir(layers[0].Upper), filepath.Dir(layers[1].Upper))

	// What commands left in the upper layer: a tree without rights, and a
	// symlink to the user's file.
	victim := filepath.Join(home, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("keep"), 0o644))
	deep := filepath.Join(layers[0].Upper, "a", "b")
	require.NoError(t, os.MkdirAll(deep, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(deep, "f"), make([]byte, 8192), 0o644))
	require.NoError(t, os.Chmod(filepath.Join(layers[0].Upper, "a"), 0))
	require.NoError(t, os.Symlink(victim, filepath.Join(layers[0].Upper, "link")))
	require.NoError(t, os.Symlink(home, filepath.Join(layers[0].Upper, "dirlink")))

	s2, busy, err := Open(p)
	require.NoError(t, err)
	assert.Empty(t, busy, "held by the first command")
	s2.Close()
	n, err := Clean(p.CacheDir)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "both held")
	assert.FileExists(t, filepath.Join(layers[0].Upper, "link"))

	require.NoError(t, s.Close())
	used, err := Usage(p.CacheDir)
	require.NoError(t, err)
	assert.Positive(t, used)
	n, err = Clean(p.CacheDir)
	require.NoError(t, err)
	assert.Zero(t, n)
	for _, l := range layers {
		ents, err := os.ReadDir(l.Upper)
		require.NoError(t, err)
		assert.Empty(t, ents, "emptied")
	}
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(b))
	b, err = os.ReadFile(filepath.Join(p.Caches[1], "mine"))
	require.NoError(t, err)
	assert.Equal(t, "mine", string(b))
	assert.FileExists(t, filepath.Join(home, ".npm", "mine"))
}

// TestOpenNoCaches: a policy without caches makes nothing.
func TestOpenNoCaches(t *testing.T) {
	home := t.TempDir()
	s, layers, err := Open(modes.Policy{Mode: modes.WorkspaceWrite, CacheDir: filepath.Join(home, "store")})
	require.NoError(t, err)
	assert.Nil(t, s)
	assert.Empty(t, layers)
	assert.NoDirExists(t, filepath.Join(home, "store"))
	assert.NoError(t, s.Close())
}

// TestCleanOnlyEntries: Clean touches only the entries Open makes: a
// directory of the user's given as the store by mistake keeps its upper
// and work directories, and gets no lock file.
func TestCleanOnlyEntries(t *testing.T) {
	store := t.TempDir()
	for _, d := range []string{"project/upper/keep", "project/work", "x-0123456789ab/upper/keep"} {
		require.NoError(t, os.MkdirAll(filepath.Join(store, d), 0o755))
	}
	n, err := Clean(store)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.DirExists(t, filepath.Join(store, "project/upper/keep"))
	assert.DirExists(t, filepath.Join(store, "x-0123456789ab/upper/keep"), "no lock file: not an entry")
	assert.NoFileExists(t, filepath.Join(store, "project/.lock"))
	assert.NoFileExists(t, filepath.Join(store, "x-0123456789ab/.lock"))
}
