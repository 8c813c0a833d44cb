//go:build linux

package audit

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestScanGitTakesUnchangedFromRecords: a walk given an earlier walk's
// records lists only the directories whose change time moved — nothing when
// nothing changed, the one directory a file was added to — and finds what
// is new there; a walk records only directories whose change time lies
// more than its settle time back.
func TestScanGitTakesUnchangedFromRecords(t *testing.T) {
	ws, v := fortyDirs(t)
	fresh, err := scanGit(v, nil, time.Hour, nil, nil)
	require.NoError(t, err)
	assert.Empty(t, fresh.read, "nothing changed an hour before: nothing recorded")

	waitTick(t)
	first, err := scanGit(v, nil, time.Nanosecond, nil, nil)
	require.NoError(t, err)
	require.Equal(t, first.listed, len(first.read), "every directory listed is recorded")
	require.Greater(t, first.listed, 80)

	waitTick(t)
	same, err := scanGit(v, nil, time.Nanosecond, first, nil)
	require.NoError(t, err)
	assert.Zero(t, same.listed, "nothing changed: nothing listed")
	assert.Equal(t, len(first.read), len(same.read), "every record still holds")
	assert.Equal(t, first.entries, same.entries)

	gitDir(t, ws, "d07/s/.git", fsmonitor)
	changed, err := scanGit(v, nil, time.Nanosecond, same, nil)
	require.NoError(t, err)
	// d07/s, and the new .git with every directory in it.
	assert.Equal(t, 1+countDirs(t, filepath.Join(ws, "d07/s/.git")), changed.listed)
	assert.True(t, changed.dirs["d07/s/.git"], "the new repository is found")
	assert.Contains(t, changed.entries, gitEntry{rel: "d07/s/.git/config", kind: gitConfig, st: stampAt(t, ws, "d07/s/.git/config")})
	assert.NotSame(t, same.read["d07/s"], changed.read["d07/s"], "d07/s is recorded anew")
	assert.Same(t, same.read["d08/s"], changed.read["d08/s"], "d08/s is kept")
}

// fortyDirs makes a workspace of 40 directories d00/s..d39/s and a
// repository, and returns it with its view (closed at the test's end).
func fortyDirs(t *testing.T) (string, *view) {
	ws := tempDir(t)
	for i := range 40 {
		mkdirs(t, ws, fmt.Sprintf("d%02d/s", i))
	}
	gitDir(t, ws, ".git", safeConfig)
	v, err := openView(ws, "")
	require.NoError(t, err)
	t.Cleanup(v.close)
	return ws, v
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

// TestScanGitWatched: a walk whose index watches what it records takes an
// unchanged directory from its record whatever its change time (here none
// vouches: the settle time is an hour), lists what an event says changed —
// a directory moved in under another's name included — and vouches for
// nothing recorded before the kernel lost events, nor beyond its budget.
func TestScanGitWatched(t *testing.T) {
	ws := tempDir(t)
	for i := range 40 {
		mkdirs(t, ws, fmt.Sprintf("d%02d/s", i))
	}
	gitDir(t, ws, ".git", safeConfig)
	gitDir(t, ws, "d09/s/.git", fsmonitor)
	require.NoError(t, os.WriteFile(filepath.Join(ws, "d20/s/.git"), []byte("gitdir: ../../d21\n"), 0o644))
	v, err := openView(ws, "")
	require.NoError(t, err)
	defer v.close()
	idx := newIndex()
	require.NotNil(t, idx)
	defer idx.close()
	scan := func(prev *gitScan) *gitScan {
		t.Helper()
		sc, err := scanGit(v, nil, time.Hour, prev, idx)
		require.NoError(t, err)
		return sc
	}

	first := scan(nil)
	require.Equal(t, first.listed, len(first.read), "every directory listed is recorded")
	require.True(t, first.whole, "every directory watched")
	assert.Equal(t, "d21", first.pointers["d20/s/.git"])
	same := scan(first)
	assert.Zero(t, same.listed, "nothing changed: nothing listed")
	assert.Equal(t, first.entries, same.entries)
	assert.True(t, same.dirs["d21"])

	// What no directory's event shows: a config and a .git file
	// rewritten in place. The walk that takes the rest whole reads them.
	cfg := stampAt(t, ws, ".git/config")
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".git/config"), []byte(fsmonitor), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "d20/s/.git"), []byte("gitdir: ../../d22\n"), 0o644))
	require.NotEqual(t, cfg, stampAt(t, ws, ".git/config"))
	same = scan(same)
	assert.Zero(t, same.listed, "no directory changed: nothing listed")
	assert.Contains(t, same.entries, gitEntry{rel: ".git/config", kind: gitConfig, st: stampAt(t, ws, ".git/config")})
	assert.Equal(t, "d22", same.pointers["d20/s/.git"], "the pointer is read again")
	assert.True(t, same.dirs["d22"])
	assert.False(t, same.dirs["d21"])
	// At the end of a command, what was a git directory at the start
	// (here d21, through the pointer) is one whatever it holds.
	end, err := scanGit(v, map[string]bool{"d21": true}, time.Hour, same, idx)
	require.NoError(t, err)
	assert.Zero(t, end.listed)
	assert.True(t, end.dirs["d21"], "a forced directory is a git directory")

	// A new repository; and d09 moved over d08, unchanged inside: its
	// repository is at a new path, found there.
	gitDir(t, ws, "d07/s/.git", fsmonitor)
	require.NoError(t, os.RemoveAll(filepath.Join(ws, "d08")))
	require.NoError(t, os.Rename(filepath.Join(ws, "d09"), filepath.Join(ws, "d08")))
	changed := scan(same)
	assert.True(t, changed.dirs["d07/s/.git"], "the new repository is found")
	assert.True(t, changed.dirs["d08/s/.git"], "the moved repository is found at its new path")
	assert.False(t, changed.dirs["d09/s/.git"])
	// The top, d07/s and its .git's directories, and d08, d08/s and its
	// .git's, whose records are another directory's.
	assert.Equal(t, 1+1+countDirs(t, filepath.Join(ws, "d07/s/.git"))+2+countDirs(t, filepath.Join(ws, "d08/s/.git")), changed.listed)
	assert.Same(t, same.read["d10/s"], changed.read["d10/s"], "d10/s is kept")

	// Reached through a parent that changed, a directory whose record
	// shows another change time (here forged: another directory that
	// got the number of a live one, on a filesystem that reuses them)
	// is listed, whatever its watch says.
	require.NoError(t, os.WriteFile(filepath.Join(ws, "d11/new"), nil, 0o644))
	forged := *changed.read["d11/s"]
	forged.ctime.Nsec ^= 1
	prev := *changed
	prev.read = maps.Clone(changed.read)
	prev.read["d11/s"] = &forged
	relisted := scan(&prev)
	assert.Equal(t, 2, relisted.listed, "d11 and d11/s")
	changed = relisted

	// More events than the queue holds: the kernel drops some, and says
	// so. Nothing recorded before is vouched for.
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	require.NoError(t, err)
	queue, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	flood := filepath.Join(ws, "d00/s")
	for i := range queue + 10 {
		f, err := os.Create(filepath.Join(flood, strconv.Itoa(i)))
		require.NoError(t, err)
		f.Close()
	}
	after := scan(changed)
	assert.Equal(t, len(changed.read), after.listed, "after an overflow, every directory is listed")
	again := scan(after)
	assert.Zero(t, again.listed, "recorded after the overflow: vouched for")

	// A mount over a directory shows no event in it: the mount table's
	// change counts as lost events. (Root only: a mount in this
	// process's namespace.)
	if os.Geteuid() == 0 {
		sub := filepath.Join(ws, "d30/s")
		require.NoError(t, unix.Mount("tmpfs", sub, "tmpfs", 0, ""))
		t.Cleanup(func() { unix.Unmount(sub, unix.MNT_DETACH) })
		gitDir(t, ws, "d30/s/.git", fsmonitor)
		mounted := scan(again)
		assert.True(t, mounted.dirs["d30/s/.git"], "the repository under the mount is found")
		assert.Equal(t, len(again.read)+countDirs(t, filepath.Join(sub, ".git")), mounted.listed)
	} else {
		t.Log("!!! not root: the mount case NOT RUN (the root run covers it)")
	}

	// A budget of 5 watches: the rest is neither watched nor recorded.
	small := newIndex()
	defer small.close()
	small.budget, small.max = 5, 5
	sc, err := scanGit(v, nil, time.Hour, nil, small)
	require.NoError(t, err)
	assert.Len(t, sc.read, 5)
	// At the budget, a directory watched that changed keeps its watch
	// (added again: no more of the budget) and its record.
	require.NoError(t, os.WriteFile(filepath.Join(ws, "new"), nil, 0o644))
	sc, err = scanGit(v, nil, time.Hour, sc, small)
	require.NoError(t, err)
	if assert.NotNil(t, sc.read["."], "the top, changed, is recorded again") {
		assert.NotZero(t, sc.read["."].wd, "with its watch")
	}
	assert.Len(t, small.watches, 5)
}

// TestWatchPrune: the watches of directories a root's walk no longer finds
// (here moved out of the root) are removed when the walk is kept, so that
// their changes no longer mark the root changed: the walk after takes the
// one before it whole again. A budget the kernel cut (ENOSPC) is tried
// again after retryWatches.
func TestWatchPrune(t *testing.T) {
	ws, out := tempDir(t), tempDir(t)
	for i := range 10 {
		mkdirs(t, ws, fmt.Sprintf("d%02d/s", i))
	}
	gitDir(t, ws, ".git", safeConfig)
	v, err := openView(ws, "")
	require.NoError(t, err)
	defer v.close()
	c := &Cache{settle: time.Hour}
	c.SetWatch(true)
	defer c.Close()
	walk := func() *gitScan {
		t.Helper()
		sc, err := scanGit(v, nil, c.settleTime(), c.get(ws), c.index())
		require.NoError(t, err)
		c.put(ws, sc)
		return sc
	}
	first := walk()
	require.True(t, first.whole)
	require.True(t, walk().reused, "nothing changed: taken whole")
	dirs := countDirs(t, ws)
	require.Len(t, c.idx.watches, dirs)

	require.NoError(t, os.Rename(filepath.Join(ws, "d03"), filepath.Join(out, "d03")))
	assert.False(t, walk().reused, "the top changed")
	assert.Len(t, c.idx.watches, dirs-2, "d03 and d03/s are no longer watched")
	assert.False(t, walk().reused, "(once more after a prune)")
	require.NoError(t, os.WriteFile(filepath.Join(out, "d03/s/f"), nil, 0o644))
	require.NoError(t, os.Chmod(filepath.Join(out, "d03"), 0o700))
	assert.True(t, walk().reused, "what changed out of the root leaves it unchanged")

	// The kernel refused a watch: no more than the index held then,
	// until retryWatches has passed.
	x := c.idx
	x.mu.Lock()
	x.max, x.retry = len(x.watches), time.Now().Add(time.Hour)
	x.mu.Unlock()
	mkdirs(t, ws, "d10")
	sc := walk()
	assert.Nil(t, sc.read["d10"], "beyond the cut budget: not recorded")
	x.mu.Lock()
	x.retry = time.Now().Add(-time.Second)
	x.mu.Unlock()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "d10/f"), nil, 0o644))
	sc = walk()
	if assert.NotNil(t, sc.read["d10"], "the budget back: recorded") {
		assert.NotZero(t, sc.read["d10"].wd)
	}

	// Another walk of the root, kept while this one ran, did not find
	// d05/s: its watch goes, and a repository made there since shows no
	// event. This walk is not taken whole after that.
	running := sc
	for i := 0; !running.whole || !running.reused; i++ {
		require.Less(t, i, 3, "a walk taken whole")
		running = walk()
	}
	other := *running
	other.read = maps.Clone(running.read)
	delete(other.read, "d05/s")
	other.reused = false
	c.put(ws, &other)
	gitDir(t, ws, "d05/s/.git", fsmonitor)
	sc, err = scanGit(v, nil, c.settleTime(), running, c.index())
	require.NoError(t, err)
	assert.False(t, sc.reused)
	assert.True(t, sc.dirs["d05/s/.git"], "the repository is found")
}
