//go:build linux

package landlock

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

const anyWrite = fsWrite &^ accessFSResolveUnix

// TestCarveProtected: with CarveProtected no rule with a write right covers
// an existing protected path in the workspace, nor any directory on the way
// down to it; every other entry along the way keeps every right. Protected
// paths outside the workspace, and those that do not exist (which would
// cost their directory every new entry), are not carved.
func TestCarveProtected(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	for _, d := range []string{".git/hooks", ".git/objects/ab", ".git/refs/heads", "src/deep"} {
		require.NoError(t, os.MkdirAll(filepath.Join(ws, d), 0o755))
	}
	for _, f := range []string{".git/config", ".git/HEAD", ".git/hooks/pre-commit.sample", "README", "src/a.go"} {
		require.NoError(t, os.WriteFile(filepath.Join(ws, f), []byte("x"), 0o644))
	}
	spill := filepath.Join(root, "spill")
	require.NoError(t, os.Mkdir(spill, 0o700))
	missing := filepath.Join(ws, "sub/.git/hooks") // its parents do not exist
	p := modes.Policy{Mode: modes.WorkspaceWrite, Workspace: ws, WritableRoots: []string{root},
		Protected: []string{filepath.Join(ws, ".git/hooks"), filepath.Join(ws, ".git/config"), missing, spill}}
	assert.ElementsMatch(t, []string{filepath.Join(ws, ".git/hooks"), filepath.Join(ws, ".git/config")}, Carved(p))

	got := map[string]uint64{}
	for _, r := range ForABIWith(p, 7, Options{CarveProtected: true}).rules {
		got[r.path] |= r.access
	}
	for path, access := range got {
		if access&anyWrite == 0 {
			continue
		}
		for _, c := range Carved(p) {
			assert.False(t, modes.Within(c, path), "rule on %s (write rights %#x) covers the carved %s", path, access&anyWrite, c)
		}
	}
	for _, d := range []string{root, ws, filepath.Join(ws, ".git")} {
		_, ok := got[d]
		assert.False(t, ok, "the way %s has a rule", d)
	}
	for _, e := range []string{"README", "src", ".git/objects", ".git/refs", ".git/HEAD"} {
		assert.Equal(t, uint64(fsRead|fsWrite), got[filepath.Join(ws, e)], e)
	}
	assert.Equal(t, uint64(fsRead|fsWrite), got[spill], "the spill directory is not carved")

	// Without the option the root is granted whole; read-only carves nothing.
	got = map[string]uint64{}
	for _, r := range ForABI(p, 7).rules {
		got[r.path] |= r.access
	}
	assert.Equal(t, uint64(fsRead|fsWrite), got[root])
	ro := p
	ro.Mode, ro.WritableRoots = modes.ReadOnly, nil
	assert.Empty(t, Carved(ro))
}
