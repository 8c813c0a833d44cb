//go:build linux

package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWalkGitFindsEveryRepository: the walk finds the control entries of
// repositories at any depth (beyond the depth where it stops holding
// descriptors too), of gitfiles, and never follows a symlink.
func TestWalkGitFindsEveryRepository(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	mk := func(rel string) string {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(p, 0o755))
		return p
	}
	write := func(rel, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(root, rel), []byte(content), 0o644))
	}
	mk(".git/hooks")
	write(".git/config", "[core]\n")
	write(".git/hooks/pre-commit", "#!/bin/sh\n")
	deep := strings.Repeat("d/", openDepth+6) + "repo/.git/hooks"
	mk(deep)
	write(strings.TrimSuffix(deep, "/hooks")+"/config", "[core]\n")
	write(deep+"/post-checkout", "#!/bin/sh\n")
	mk("sub")
	write("sub/.git", "gitdir: ../elsewhere\n")
	require.NoError(t, os.MkdirAll(filepath.Join(outside, "r/.git/hooks"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "r/.git/config"), []byte("[core]\n"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(outside, "r"), filepath.Join(root, "link")))

	var found []string
	require.NoError(t, walkGit(root, func(_ *os.Root, c gitControl, _ stamp) { found = append(found, c.rel) }))
	deepGit := strings.TrimSuffix(deep, "/hooks")
	for _, want := range []string{".git/config", ".git/hooks", ".git/hooks/pre-commit", deepGit + "/config", deep, deep + "/post-checkout", "sub/.git"} {
		assert.Contains(t, found, want)
	}
	for _, f := range found {
		assert.False(t, strings.HasPrefix(f, "link/"), "followed a symlink: %s", f)
	}
}
