//go:build linux

package audit

import (
	"bytes"
	"io"
	"io/fs"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// TestRecordsBetweenProcesses: records written by one cache and read by
// another serve a walk as the first cache's would — nothing listed when
// nothing changed, a repository planted since found — and a cache that
// listed nothing since it read its records says so. A damaged, truncated or
// foreign file is refused whole, and the cache keeps what it had.
func TestRecordsBetweenProcesses(t *testing.T) {
	ws, v := fortyDirs(t)
	waitTick(t)
	first, err := scanGit(v, nil, time.Nanosecond, nil, nil)
	require.NoError(t, err)
	require.Greater(t, len(first.read), 80)
	var c1 Cache
	c1.put(ws, first)
	var buf bytes.Buffer
	changed, err := c1.WriteRecords(&buf)
	require.NoError(t, err)
	assert.True(t, changed, "a walk listed every directory")
	assert.True(t, c1.RecordsChanged(), "RecordsChanged says what WriteRecords does")
	file := bytes.Clone(buf.Bytes())

	var c2 Cache
	require.NoError(t, c2.ReadRecords(bytes.NewReader(file)))
	prev := c2.get(ws)
	require.NotNil(t, prev)
	assert.Equal(t, len(first.read), len(prev.read))
	for rel, r := range first.read {
		got := prev.read[rel]
		if assert.NotNil(t, got, rel) {
			assert.Equal(t, [3]any{r.dev, r.ino, r.ctime}, [3]any{got.dev, got.ino, got.ctime}, rel)
			assert.Equal(t, r.ents, got.ents, rel)
		}
	}
	same, err := scanGit(v, nil, time.Nanosecond, prev, nil)
	require.NoError(t, err)
	assert.Zero(t, same.listed, "nothing changed: nothing listed")
	assert.Equal(t, first.entries, same.entries)
	c2.put(ws, same)
	buf.Reset()
	changed, err = c2.WriteRecords(&buf)
	require.NoError(t, err)
	assert.False(t, changed, "nothing listed since the records were read")
	assert.False(t, c2.RecordsChanged(), "RecordsChanged says what WriteRecords does")
	assert.Equal(t, file, buf.Bytes(), "the same records")

	gitDir(t, ws, "d07/s/.git", fsmonitor)
	planted, err := scanGit(v, nil, time.Nanosecond, c2.get(ws), nil)
	require.NoError(t, err)
	assert.True(t, planted.dirs["d07/s/.git"], "the repository planted since is found")
	assert.Positive(t, planted.listed)
	c3 := Cache{}
	require.NoError(t, c3.ReadRecords(bytes.NewReader(file)))
	c3.put(ws, planted)
	assert.True(t, c3.RecordsChanged(), "a walk that listed a directory changes the records")

	// Damaged files: every truncation, every flipped byte, another magic.
	for n := range len(file) {
		assert.ErrorIs(t, c2.ReadRecords(bytes.NewReader(file[:n])), ErrRecords, "truncated to %d bytes", n)
	}
	for i := range len(file) {
		bad := bytes.Clone(file)
		bad[i] ^= 0x20
		assert.ErrorIs(t, c2.ReadRecords(bytes.NewReader(bad)), ErrRecords, "byte %d flipped", i)
	}
	assert.ErrorIs(t, c2.ReadRecords(bytes.NewReader(append(bytes.Clone(file), 0))), ErrRecords, "data after the end")
	assert.Same(t, same, c2.get(ws), "a refused file changes nothing")

	// Well-formed files whose records cannot be a walk's.
	for _, tc := range []struct {
		root, rel string
		ent       dirent
	}{
		{ws, "../x", dirent{name: "a"}},
		{ws, "/abs", dirent{name: "a"}},
		{ws, "a/../b", dirent{name: "a"}},
		{ws, "a", dirent{name: "b/c"}},
		{ws, "a", dirent{name: ".."}},
		{"relative", "a", dirent{name: "a"}},
	} {
		var c Cache
		c.put(tc.root, &gitScan{read: map[string]*dirRecord{tc.rel: {ctimeOK: true, ents: []dirent{tc.ent}}}, listed: 1})
		buf.Reset()
		_, err := c.WriteRecords(&buf)
		require.NoError(t, err)
		assert.ErrorIs(t, c2.ReadRecords(&buf), ErrRecords, "%+v", tc)
	}
	assert.Same(t, same, c2.get(ws))
}

// TestLoadRecords: records loaded in the background serve the next walk as
// ReadRecords' do (a get waits for them), and RecordsChanged does not wait:
// no walk put since. A file it cannot take leaves the cache as it was.
func TestLoadRecords(t *testing.T) {
	ws, v := fortyDirs(t)
	waitTick(t)
	first, err := scanGit(v, nil, time.Nanosecond, nil, nil)
	require.NoError(t, err)
	var c1 Cache
	c1.put(ws, first)
	var buf bytes.Buffer
	_, err = c1.WriteRecords(&buf)
	require.NoError(t, err)

	var c2 Cache
	pr, pw := io.Pipe()
	c2.LoadRecords(pr)
	assert.False(t, c2.RecordsChanged(), "nothing put while loading")
	got := make(chan *gitScan, 1)
	go func() { got <- c2.get(ws) }()
	select {
	case <-got:
		t.Fatal("get returned before the records were in")
	case <-time.After(20 * time.Millisecond):
	}
	_, err = pw.Write(buf.Bytes())
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	prev := <-got
	require.NotNil(t, prev)
	assert.Equal(t, len(first.read), len(prev.read))

	// Given up by a stopped walk while loading.
	var c3 Cache
	pr3, pw3 := io.Pipe()
	defer pw3.Close()
	c3.LoadRecords(pr3)
	stop := make(chan struct{})
	close(stop)
	_, ok := c3.getUnless(ws, stop)
	assert.False(t, ok)

	c2.LoadRecords(bytes.NewReader([]byte("damaged")))
	assert.Same(t, prev, c2.get(ws), "a refused file changes nothing")
}

// TestStartStoppable: a start walk whose stop is closed returns ErrStopped
// and leaves its cache as it was; one not stopped is Start.
func TestStartStoppable(t *testing.T) {
	ws, _ := fortyDirs(t)
	p := modes.Policy{Mode: modes.WorkspaceWrite, Workspace: ws, WritableRoots: []string{ws}}
	var c Cache
	stop := make(chan struct{})
	close(stop)
	_, err := StartStoppable(p, nil, &c, stop)
	assert.ErrorIs(t, err, ErrStopped)
	assert.Nil(t, c.get(ws), "an abandoned walk keeps nothing")

	audits, err := StartStoppable(p, nil, &c, make(chan struct{}))
	require.NoError(t, err)
	require.Len(t, audits, 1)
	want, err := Start(p, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, want[0].git, audits[0].git)
	assert.Equal(t, want[0].gitDirs, audits[0].gitDirs)

	missing := p
	missing.Workspace, missing.WritableRoots = ws+"/missing", []string{ws + "/missing"}
	assert.ErrorIs(t, CheckRoots(missing), fs.ErrNotExist)
	assert.NoError(t, CheckRoots(p))
}
