//go:build linux

package changes

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// fixture is a root directory standing for a command's root, with the
// writable root /ws in it.
type fixture struct {
	t    *testing.T
	dir  string // the root on the host
	root int
}

func newFixture(t *testing.T) *fixture {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "ws"), 0o755))
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	return &fixture{t: t, dir: dir, root: fd}
}

func (f *fixture) host(p string) string { return filepath.Join(f.dir, p) }

func (f *fixture) write(p, data string) {
	require.NoError(f.t, os.WriteFile(f.host(p), []byte(data), 0o644))
}

func (f *fixture) tracker() *Tracker {
	return NewTracker(modes.Policy{Mode: modes.WorkspaceWrite, WritableRoots: []string{"/ws"}})
}

func TestSettle(t *testing.T) {
	past := time.Now().Add(-time.Hour)
	tests := []struct {
		name    string
		setup   func(f *fixture) // before the command
		touched []string         // the paths its calls named
		renames [][2]string      // the renames it made
		run     func(f *fixture) // what it did
		want    []Change
	}{
		{
			name:    "created",
			touched: []string{"/ws/a.txt"},
			run:     func(f *fixture) { f.write("ws/a.txt", "hello") },
			want:    []Change{{Op: OpCreated, Path: "/ws/a.txt", Type: "file", Size: 5, Mode: "0644"}},
		},
		{
			name: "modified",
			setup: func(f *fixture) {
				f.write("ws/a.txt", "old")
				os.Chtimes(f.host("ws/a.txt"), past, past)
			},
			touched: []string{"/ws/a.txt"},
			run:     func(f *fixture) { f.write("ws/a.txt", "new!") },
			want:    []Change{{Op: OpModified, Path: "/ws/a.txt", Type: "file", Size: 4, Mode: "0644"}},
		},
		{
			name:    "opened for writing, not written",
			setup:   func(f *fixture) { f.write("ws/a.txt", "same") },
			touched: []string{"/ws/a.txt"},
			run: func(f *fixture) {
				fd, err := os.OpenFile(f.host("ws/a.txt"), os.O_WRONLY, 0)
				require.NoError(t, err)
				fd.Close()
			},
		},
		{
			name:    "removed",
			setup:   func(f *fixture) { f.write("ws/a.txt", "x") },
			touched: []string{"/ws/a.txt"},
			run:     func(f *fixture) { os.Remove(f.host("ws/a.txt")) },
			want:    []Change{{Op: OpRemoved, Path: "/ws/a.txt"}},
		},
		{
			name:    "a temporary file, created and removed",
			touched: []string{"/ws/tmp.1"},
			run: func(f *fixture) {
				f.write("ws/tmp.1", "x")
				os.Remove(f.host("ws/tmp.1"))
			},
		},
		{
			name:    "renamed",
			setup:   func(f *fixture) { f.write("ws/a.txt", "abc") },
			renames: [][2]string{{"/ws/a.txt", "/ws/b.txt"}},
			run:     func(f *fixture) { os.Rename(f.host("ws/a.txt"), f.host("ws/b.txt")) },
			want:    []Change{{Op: OpRenamed, Path: "/ws/b.txt", From: "/ws/a.txt", Type: "file", Size: 3, Mode: "0644"}},
		},
		{
			name:    "renamed twice",
			setup:   func(f *fixture) { f.write("ws/a", "abc") },
			renames: [][2]string{{"/ws/a", "/ws/b"}, {"/ws/b", "/ws/c"}},
			run: func(f *fixture) {
				os.Rename(f.host("ws/a"), f.host("ws/b"))
				os.Rename(f.host("ws/b"), f.host("ws/c"))
			},
			want: []Change{{Op: OpRenamed, Path: "/ws/c", From: "/ws/a", Type: "file", Size: 3, Mode: "0644"}},
		},
		{
			name:    "an editor's save: a new file renamed over the old",
			setup:   func(f *fixture) { f.write("ws/a.txt", "old") },
			touched: []string{"/ws/.a.txt.swp"},
			renames: [][2]string{{"/ws/.a.txt.swp", "/ws/a.txt"}},
			run: func(f *fixture) {
				f.write("ws/.a.txt.swp", "new")
				os.Rename(f.host("ws/.a.txt.swp"), f.host("ws/a.txt"))
			},
			want: []Change{{Op: OpModified, Path: "/ws/a.txt", Type: "file", Size: 3, Mode: "0644"}},
		},
		{
			name:    "mode",
			setup:   func(f *fixture) { f.write("ws/run.sh", "#!/bin/sh") },
			touched: []string{"/ws/run.sh"},
			run:     func(f *fixture) { os.Chmod(f.host("ws/run.sh"), 0o755) },
			want:    []Change{{Op: OpMode, Path: "/ws/run.sh", Type: "file", Size: 9, Mode: "0755"}},
		},
		{
			name:    "a directory and a symlink",
			touched: []string{"/ws/d", "/ws/d/f", "/ws/l"},
			run: func(f *fixture) {
				os.Mkdir(f.host("ws/d"), 0o700)
				f.write("ws/d/f", "")
				os.Symlink("/etc/passwd", f.host("ws/l"))
			},
			want: []Change{
				{Op: OpCreated, Path: "/ws/d", Type: "dir", Mode: "0700"},
				{Op: OpCreated, Path: "/ws/d/f", Type: "file", Mode: "0644"},
				{Op: OpCreated, Path: "/ws/l", Type: "symlink", Mode: "0777"},
			},
		},
		{
			// The removed file's inode is reused by the next file made:
			// without a rename call between them, no rename.
			name:    "removed, then another made",
			setup:   func(f *fixture) { f.write("ws/gone", "x") },
			touched: []string{"/ws/gone", "/ws/d"},
			run: func(f *fixture) {
				ino := func(p string) uint64 {
					var st unix.Stat_t
					unix.Lstat(f.host(p), &st)
					return st.Ino
				}
				old := ino("ws/gone")
				os.Remove(f.host("ws/gone"))
				f.write("ws/d", "y")
				if ino("ws/d") != old {
					t.Log("the inode was not reused; the case still checks the ops")
				}
			},
			want: []Change{
				{Op: OpRemoved, Path: "/ws/gone"},
				{Op: OpCreated, Path: "/ws/d", Type: "file", Size: 1, Mode: "0644"},
			},
		},
		{
			name:    "outside the writable roots",
			touched: []string{"/other/a", "/wsx/a"},
			setup: func(f *fixture) {
				os.Mkdir(f.host("other"), 0o755)
				os.Mkdir(f.host("wsx"), 0o755)
			},
			run: func(f *fixture) {
				f.write("other/a", "x")
				f.write("wsx/a", "x")
			},
		},
		{
			name:    "a parent replaced by a symlink is not followed",
			setup:   func(f *fixture) { os.Mkdir(f.host("ws/d"), 0o755); os.Mkdir(f.host("elsewhere"), 0o755) },
			touched: []string{"/ws/d/secret"},
			run: func(f *fixture) {
				// The name is now reached through a symlink to a file the
				// command could not write: it must not be reported.
				f.write("elsewhere/secret", "x")
				os.Remove(f.host("ws/d"))
				os.Symlink("/elsewhere", f.host("ws/d"))
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			tr := f.tracker()
			for _, p := range tc.touched {
				tr.Touch(f.root, p)
				tr.Touch(f.root, p) // a second call changes nothing
			}
			for _, r := range tc.renames {
				tr.Rename(f.root, r[0], r[1])
			}
			tc.run(f)
			got, dropped := tr.Settle()
			for i := range tc.want {
				tc.want[i].Root = "/ws" // every path of these is in the one root
			}
			require.Equal(t, tc.want, got)
			require.Zero(t, dropped)
		})
	}
}

// TestTouchRecordsTheStateBefore: the state is read at Touch, so a file
// the call then creates is "created", not "modified".
func TestTouchRecordsTheStateBefore(t *testing.T) {
	f := newFixture(t)
	tr := f.tracker()
	tr.Touch(f.root, "/ws/new")
	f.write("ws/new", "1")
	tr.Touch(f.root, "/ws/new") // a later call on the same path: still new
	f.write("ws/new", "12")
	got, _ := tr.Settle()
	require.Equal(t, []Change{{Op: OpCreated, Path: "/ws/new", Type: "file", Size: 2, Mode: "0644", Root: "/ws"}}, got)
}

func TestCaps(t *testing.T) {
	f := newFixture(t)
	tr := f.tracker()
	n := MaxChanges + 5
	for i := range n {
		tr.Touch(f.root, filepath.Join("/ws", "f"+strconv.Itoa(i)))
		f.write(filepath.Join("ws", "f"+strconv.Itoa(i)), "")
	}
	got, dropped := tr.Settle()
	require.Len(t, got, MaxChanges)
	require.Equal(t, map[string]int{"/ws": 5}, dropped)
	require.Equal(t, "/ws/f0", got[0].Path)

	// Past MaxTracked, new paths are only counted.
	tr = f.tracker()
	for i := range MaxTracked + 3 {
		tr.Touch(f.root, filepath.Join("/ws", "g"+strconv.Itoa(i)))
	}
	got, dropped = tr.Settle()
	require.Empty(t, got)
	require.Equal(t, map[string]int{"/ws": 3}, dropped)
}

// TestCapsPerRoot: the caps are per writable root, so the churn of one
// (a build's temporary files) cannot crowd out another's changes.
func TestCapsPerRoot(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, os.Mkdir(f.host("scratch"), 0o755))
	tr := NewTracker(modes.Policy{Mode: modes.WorkspaceWrite, WritableRoots: []string{"/ws", "/scratch"}})
	for i := range MaxTracked + 7 {
		p := "scratch/t" + strconv.Itoa(i)
		tr.Touch(f.root, "/"+p)
		if i < MaxChanges+5 {
			f.write(p, "")
		}
	}
	for _, n := range []string{"a", "b", "c"} {
		tr.Touch(f.root, "/ws/"+n)
		f.write("ws/"+n, n)
	}
	got, dropped := tr.Settle()
	var ws []string
	scratch := 0
	for _, c := range got {
		switch c.Root {
		case "/ws":
			ws = append(ws, c.Path)
		case "/scratch":
			scratch++
		default:
			t.Errorf("change %+v: root %q", c, c.Root)
		}
	}
	require.Equal(t, []string{"/ws/a", "/ws/b", "/ws/c"}, ws, "the workspace's changes, all of them")
	require.Equal(t, MaxChanges, scratch)
	require.Equal(t, map[string]int{"/scratch": 5 + 7}, dropped, "5 over the list's cap, 7 over the tracker's")
}

func TestNilAndUnused(t *testing.T) {
	var tr *Tracker
	tr.Touch(0, "/ws/a")
	got, dropped := tr.Settle()
	require.Nil(t, got)
	require.Zero(t, dropped)
	tr.Close()
	f := newFixture(t)
	tr = f.tracker()
	got, _ = tr.Settle()
	require.Nil(t, got)
	tr = f.tracker()
	tr.Touch(f.root, "/ws/a")
	tr.Close() // never settled: the root is released
	require.Equal(t, -1, tr.root)
}
