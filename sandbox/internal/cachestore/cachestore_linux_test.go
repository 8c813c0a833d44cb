package cachestore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	}
	assert.NotEqual(t, filepath.Dir(layers[0].Upper), filepath.Dir(layers[1].Upper))
	assert.True(t, layers[0].Empty, "made empty: nothing of the user's below")
	assert.Empty(t, layers[0].Work, "bound, not mounted: no work directory")
	assert.False(t, layers[1].Empty, "holds the user's entry")
	assert.DirExists(t, layers[1].Work)
	assert.Equal(t, filepath.Join(filepath.Dir(layers[1].Upper), "work"), filepath.Dir(layers[1].Work), "a work directory of its own in the entry's")

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
	// And a read-only tree, as Go's module cache keeps one: readable and
	// searchable, but nothing in it can be removed without a change of mode.
	mod := filepath.Join(layers[1].Upper, "mod", "x@v1")
	require.NoError(t, os.MkdirAll(mod, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module x\n"), 0o444))
	require.NoError(t, os.Chmod(mod, 0o555))
	require.NoError(t, os.Chmod(filepath.Dir(mod), 0o555))

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

// TestReadyVolatile: an entry mounted in this boot keeps its upper layer
// and what its mounts left (sweepWork removes that beside the command);
// one mounted in another boot, or an unknown one, is emptied — in either
// layout of its work directory — and one never mounted keeps its layer;
// either way the boot is recorded for the next command.
func TestReadyVolatile(t *testing.T) {
	const boot = "b4be5ada-a8d6-4f95-bf5b-ec815f6c8323"
	for _, tc := range []struct {
		name      string
		left      string // what a mount left in the work directory ("": nothing)
		recorded  string
		wantUpper bool
		wantLeft  bool
	}{
		{"never mounted", "", "", true, false},
		{"same boot", "w-0011223344556677/work", boot + "\n", true, true},
		{"restarted", "w-0011223344556677/work", "0d4c58a7-7e0a-4c1e-9a43-43c5b63a0c1f\n", false, false},
		{"unknown boot", "w-0011223344556677/work", "", false, false},
		{"restarted, one work directory for every mount", "work", "0d4c58a7-7e0a-4c1e-9a43-43c5b63a0c1f\n", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := t.TempDir()
			t.Cleanup(func() { sweepWork(e, "") }) // (a directory without rights, for TempDir's removal)
			upperFile := filepath.Join(e, "upper", "kept")
			require.NoError(t, os.MkdirAll(filepath.Dir(upperFile), 0o700))
			require.NoError(t, os.WriteFile(upperFile, []byte("cache"), 0o600))
			require.NoError(t, os.MkdirAll(filepath.Join(e, "work"), 0o700))
			left := filepath.Join(e, "work", tc.left)
			if tc.left != "" {
				require.NoError(t, os.MkdirAll(filepath.Join(left, "incompat", "volatile"), 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(left, "incompat", "volatile", "dirty"), nil, 0o600))
				// As the kernel leaves it: its work directory without rights.
				require.NoError(t, os.Chmod(left, 0))
			}
			if tc.recorded != "" {
				require.NoError(t, os.WriteFile(filepath.Join(e, bootFile), []byte(tc.recorded), 0o600))
			}

			require.NoError(t, readyVolatile(e, boot))

			if tc.wantUpper {
				assert.FileExists(t, upperFile)
			} else {
				assert.NoFileExists(t, upperFile, "a restart empties the upper layer")
				assert.DirExists(t, filepath.Join(e, "upper"))
			}
			assert.DirExists(t, filepath.Join(e, "work"))
			if tc.left != "" {
				_, err := os.Lstat(left)
				assert.Equal(t, tc.wantLeft, err == nil, "what the mount left is there: %v", err)
			}
			b, err := os.ReadFile(filepath.Join(e, bootFile))
			require.NoError(t, err)
			assert.Equal(t, boot+"\n", string(b))
		})
	}
}

// TestReadyVolatileRefusesLinks: a symlink in place of the work directory
// or of the boot record is never followed.
func TestReadyVolatileRefusesLinks(t *testing.T) {
	const boot = "b4be5ada-a8d6-4f95-bf5b-ec815f6c8323"
	e, victim := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(victim, "work", "incompat"), 0o700))
	require.NoError(t, os.Symlink(victim, filepath.Join(e, "work")))
	require.NoError(t, os.WriteFile(filepath.Join(e, bootFile), []byte("0d4c58a7-7e0a-4c1e-9a43-43c5b63a0c1f\n"), 0o600))
	assert.Error(t, readyVolatile(e, boot))
	assert.DirExists(t, filepath.Join(victim, "work", "incompat"), "nothing removed through the link")

	e2 := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(e2, "work"), 0o700))
	target := filepath.Join(victim, "record")
	require.NoError(t, os.WriteFile(target, []byte("mine"), 0o600))
	require.NoError(t, os.Symlink(target, filepath.Join(e2, bootFile)))
	assert.Error(t, readyVolatile(e2, boot))
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "mine", string(b), "nothing written through the link")
}

// TestFreshWork: each mount's work directory is a new empty one in the
// entry's, never reached through a symlink.
func TestFreshWork(t *testing.T) {
	e := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(e, "work"), 0o700))
	a, err := freshWork(e)
	require.NoError(t, err)
	b, err := freshWork(e)
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	for _, n := range []string{a, b} {
		assert.True(t, strings.HasPrefix(n, workPrefix), n)
		ents, err := os.ReadDir(filepath.Join(e, "work", n))
		require.NoError(t, err)
		assert.Empty(t, ents)
	}

	e2, victim := t.TempDir(), t.TempDir()
	require.NoError(t, os.Symlink(victim, filepath.Join(e2, "work")))
	_, err = freshWork(e2)
	assert.Error(t, err)
	ents, err := os.ReadDir(victim)
	require.NoError(t, err)
	assert.Empty(t, ents, "nothing made through the link")
}

// TestSweepWork: everything earlier mounts left in an entry's work
// directory goes — work directories without rights and their markers, the
// directories of the layout with one work directory for every mount — but
// this command's; a symlink among them is removed, not followed.
func TestSweepWork(t *testing.T) {
	e, victim := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(victim, "mine"), []byte("mine"), 0o600))
	work := filepath.Join(e, "work")
	for _, d := range []string{"w-aa/work/incompat/volatile", "work/incompat/volatile", "index/x", "w-keep/work"} {
		require.NoError(t, os.MkdirAll(filepath.Join(work, d), 0o700))
	}
	require.NoError(t, os.WriteFile(filepath.Join(work, "w-aa/work/incompat/volatile/f"), nil, 0o600))
	require.NoError(t, os.Chmod(filepath.Join(work, "w-aa/work"), 0))
	require.NoError(t, os.Chmod(filepath.Join(work, "work"), 0))
	require.NoError(t, os.Symlink(victim, filepath.Join(work, "w-link")))

	sweepWork(e, "w-keep")

	ents, err := os.ReadDir(work)
	require.NoError(t, err)
	var names []string
	for _, d := range ents {
		names = append(names, d.Name())
	}
	assert.Equal(t, []string{"w-keep"}, names)
	assert.DirExists(t, filepath.Join(work, "w-keep/work"), "this command's is kept whole")
	b, err := os.ReadFile(filepath.Join(victim, "mine"))
	require.NoError(t, err)
	assert.Equal(t, "mine", string(b))
}

// TestOpenSweepsEarlierWork: a command's Open leaves the previous
// command's work directory to the sweep, which is done by its Close.
func TestOpenSweepsEarlierWork(t *testing.T) {
	home := t.TempDir()
	p := modes.Policy{Mode: modes.WorkspaceWrite, CacheDir: filepath.Join(home, modes.HomeCacheDir),
		Caches: []string{filepath.Join(home, ".npm")}}
	require.NoError(t, os.MkdirAll(p.Caches[0], 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(p.Caches[0], "mine"), []byte("mine"), 0o644))
	s, layers, err := Open(p)
	require.NoError(t, err)
	first := layers[0].Work
	// As a volatile mount leaves it.
	require.NoError(t, os.MkdirAll(filepath.Join(first, "work", "incompat", "volatile"), 0o700))
	require.NoError(t, os.Chmod(filepath.Join(first, "work"), 0))
	require.NoError(t, s.Close())

	s, layers, err = Open(p)
	require.NoError(t, err)
	assert.NotEqual(t, first, layers[0].Work)
	require.NoError(t, s.Close())
	assert.NoDirExists(t, first, "swept by the next command")
	assert.DirExists(t, layers[0].Work)
}

// TestBoundKeepsEarlierWork: a cache the user emptied is bound, not
// overlaid, and its command leaves the earlier overlay's work directory
// (its volatile marker) in place, for readyVolatile to find after a
// restart; the next overlay sweeps it.
func TestBoundKeepsEarlierWork(t *testing.T) {
	home := t.TempDir()
	p := modes.Policy{Mode: modes.WorkspaceWrite, CacheDir: filepath.Join(home, modes.HomeCacheDir),
		Caches: []string{filepath.Join(home, ".npm")}}
	require.NoError(t, os.MkdirAll(p.Caches[0], 0o755))
	mine := filepath.Join(p.Caches[0], "mine")
	require.NoError(t, os.WriteFile(mine, []byte("mine"), 0o644))
	s, layers, err := Open(p)
	require.NoError(t, err)
	first := layers[0].Work
	require.NoError(t, os.MkdirAll(filepath.Join(first, "work", "incompat", "volatile"), 0o700))
	require.NoError(t, s.Close())

	require.NoError(t, os.Remove(mine)) // the user empties the cache
	s, layers, err = Open(p)
	require.NoError(t, err)
	require.True(t, layers[0].Empty)
	require.NoError(t, s.Close())
	assert.DirExists(t, filepath.Join(first, "work", "incompat", "volatile"), "kept by a bound command")

	require.NoError(t, os.WriteFile(mine, []byte("mine"), 0o644))
	s, layers, err = Open(p)
	require.NoError(t, err)
	require.False(t, layers[0].Empty)
	require.NoError(t, s.Close())
	assert.NoDirExists(t, first, "swept by the next overlay")
}

func TestAtLeast(t *testing.T) {
	for _, tc := range []struct {
		rel  string
		want bool
	}{
		{"6.1.0-57-amd64", true}, {"5.10.0", true}, {"5.9.16", false}, {"5.15.0-91-generic", true},
		{"4.19.0", false}, {"10.0", true}, {"5.14.0-427.el9.x86_64", true}, {"junk", false},
	} {
		assert.Equal(t, tc.want, atLeast(tc.rel, 5, 10), tc.rel)
	}
}

// TestIsEmpty: a directory is empty when it lists nothing but "." and "..",
// however many entries the others hold; what cannot be read is not empty.
func TestIsEmpty(t *testing.T) {
	dir := t.TempDir()
	many := filepath.Join(dir, "many")
	require.NoError(t, os.Mkdir(many, 0o700))
	for i := range 300 {
		require.NoError(t, os.WriteFile(filepath.Join(many, fmt.Sprintf("entry-with-a-long-name-%03d", i)), nil, 0o600))
	}
	one := filepath.Join(dir, "one")
	require.NoError(t, os.MkdirAll(filepath.Join(one, "sub"), 0o700))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.Mkdir(empty, 0o700))
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for _, tc := range []struct {
		dir  string
		want bool
	}{
		{empty, true},
		{one, false},
		{many, false},
		{file, false},
		{filepath.Join(dir, "missing"), false},
	} {
		assert.Equal(t, tc.want, isEmpty(tc.dir), tc.dir)
	}
}
