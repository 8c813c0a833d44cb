//go:build linux

package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// TestSpillFilesNeverFollowTheSpillPath: the spill directory's path lies in
// a writable root (/tmp); wherever that path points once commands ran (moved
// away and replaced by a symlink — what a command can race for on a host
// without a mount view, or any other process of the user), spill files are
// created and removed in the directory the executor made, never where the
// path now leads.
func TestSpillFilesNeverFollowTheSpillPath(t *testing.T) {
	victim := t.TempDir()
	e := newTestExecutor(t, Config{Mode: modes.ReadOnly, TailBytes: 100, SpillCap: 4000})
	orig := e.SpillDir()
	moved := orig + "-moved"
	require.NoError(t, os.Rename(orig, moved))
	t.Cleanup(func() { os.Remove(orig); os.RemoveAll(moved) })
	require.NoError(t, os.Symlink(victim, orig))

	for _, c := range []struct {
		name, cmd string
		kept      bool
	}{
		{"spilled", "head -c 2000 /dev/zero | tr '\\0' x", true},
		{"past the cap", "head -c 9000 /dev/zero | tr '\\0' x", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := e.Run(context.Background(), Request{Command: c.cmd})
			require.NoError(t, err)
			require.Equal(t, 0, res.ExitCode, res.Stderr.Text)
			ents, err := os.ReadDir(victim)
			require.NoError(t, err)
			assert.Empty(t, ents, "a spill file went where the spill path now points")
			ents, err = os.ReadDir(moved)
			require.NoError(t, err)
			var names []string
			for _, ent := range ents {
				if strings.HasSuffix(ent.Name(), "-stdout.log") {
					names = append(names, ent.Name())
				}
			}
			if c.kept {
				require.NotEmpty(t, res.Stdout.SpillPath)
				assert.Contains(t, names, filepath.Base(res.Stdout.SpillPath), "the spill file is in the executor's own directory")
			} else {
				assert.Empty(t, res.Stdout.SpillPath)
				assert.Empty(t, names, "a spill past the cap is removed from the executor's own directory")
			}
			for _, n := range names {
				os.Remove(filepath.Join(moved, n))
			}
		})
	}
}
