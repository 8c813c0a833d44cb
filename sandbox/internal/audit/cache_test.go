//go:build linux

package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestScanGitTakesUnchangedFromRecords: a walk given an earlier walk's
// records lists only the directories whose change time moved — nothing when
// nothing changed, the one directory a file was added to — and finds what
// is new there; a walk records only directories whose change time lies
// more than its settle time back.
func TestScanGitTakesUnchangedFromRecords(t *testing.T) {
	ws := tempDir(t)
	for i := range 40 {
		mkdirs(t, ws, fmt.Sprintf("d%02d/s", i))
	}
	gitDir(t, ws, ".git", safeConfig)
	v, err := openView(ws, "")
	require.NoError(t, err)
	defer v.close()

	fresh, err := scanGit(v, nil, time.Hour, nil)
	require.NoError(t, err)
	assert.Empty(t, fresh.read, "nothing changed an hour before: nothing recorded")

	waitTick(t)
	first, err := scanGit(v, nil, time.Nanosecond, nil)
	require.NoError(t, err)
	require.Equal(t, first.listed, len(first.read), "every directory listed is recorded")
	require.Greater(t, first.listed, 80)

	waitTick(t)
	same, err := scanGit(v, nil, time.Nanosecond, first.read)
	require.NoError(t, err)
	assert.Zero(t, same.listed, "nothing changed: nothing listed")
	assert.Equal(t, len(first.read), len(same.read), "every record still holds")
	assert.Equal(t, first.entries, same.entries)

	gitDir(t, ws, "d07/s/.git", fsmonitor)
	changed, err := scanGit(v, nil, time.Nanosecond, same.read)
	require.NoError(t, err)
	// d07/s, and the new .git with every directory in it.
	assert.Equal(t, 1+countDirs(t, filepath.Join(ws, "d07/s/.git")), changed.listed)
	assert.True(t, changed.dirs["d07/s/.git"], "the new repository is found")
	assert.Contains(t, changed.entries, gitEntry{rel: "d07/s/.git/config", kind: gitConfig, st: stampAt(t, ws, "d07/s/.git/config")})
	assert.NotSame(t, same.read["d07/s"], changed.read["d07/s"], "d07/s is recorded anew")
	assert.Same(t, same.read["d08/s"], changed.read["d08/s"], "d08/s is kept")
}

func stampAt(t *testing.T, dir, rel string) stamp {
	fi, err := os.Lstat(filepath.Join(dir, rel))
	require.NoError(t, err)
	st, _ := stampOf(fi)
	return st
}

// countDirs counts the directories at and under dir.
func countDirs(t *testing.T, dir string) int {
	n := 0
	require.NoError(t, filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			n++
		}
		return err
	}))
	return n
}
