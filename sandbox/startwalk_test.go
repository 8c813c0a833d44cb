//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// TestWalksBeside: the start walk runs beside the command only where the
// supervisor sees every change the command can make: not without user
// notification, not with the network open or an allowlist, not outside
// workspace-write, and not when the command is given a regular file open
// for writing that is named in an audited root, has another link, or was
// deleted; a read-only file, a pipe or a file elsewhere are no reason.
func TestWalksBeside(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	elsewhere, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	open := func(path string, flag int) *os.File {
		f, err := os.OpenFile(path, flag|os.O_CREATE, 0o644)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		return f
	}
	inRoot := open(filepath.Join(ws, "log"), os.O_WRONLY)
	readOnly := open(filepath.Join(ws, "in"), os.O_RDONLY)
	outside := open(filepath.Join(elsewhere, "log"), os.O_WRONLY)
	linked := open(filepath.Join(elsewhere, "linked"), os.O_WRONLY)
	require.NoError(t, os.Link(filepath.Join(elsewhere, "linked"), filepath.Join(elsewhere, "linked2")))
	deleted := open(filepath.Join(elsewhere, "deleted"), os.O_WRONLY)
	require.NoError(t, os.Remove(filepath.Join(elsewhere, "deleted")))
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	defer pw.Close()
	allow, err := modes.NewAllowlist([]string{"example.com"}, nil, nil, nil)
	require.NoError(t, err)

	base := modes.Policy{Mode: modes.WorkspaceWrite, Workspace: ws, WritableRoots: []string{ws}}
	for _, tc := range []struct {
		what   string
		edit   func(c *Cmd)
		beside bool
	}{
		{"a supervisor, nothing handed over", func(*Cmd) {}, true},
		{"no user notification", func(c *Cmd) { c.prep.notify = false }, false},
		{"read-only mode", func(c *Cmd) { c.Policy.Mode = modes.ReadOnly }, false},
		{"the network open", func(c *Cmd) { c.Policy.Network = true }, false},
		{"an allowlist", func(c *Cmd) { c.Policy.Allowlist = allow }, false},
		{"stdout a file in the workspace", func(c *Cmd) { c.Stdout = inRoot }, false},
		{"an extra file in the workspace", func(c *Cmd) { c.ExtraFiles = []*os.File{pw, inRoot} }, false},
		{"stdin a file in the workspace, read-only", func(c *Cmd) { c.Stdin = readOnly }, true},
		{"stdout a file elsewhere", func(c *Cmd) { c.Stdout = outside }, true},
		{"stdout a file elsewhere with another link", func(c *Cmd) { c.Stdout = linked }, false},
		{"stdout a deleted file", func(c *Cmd) { c.Stdout = deleted }, false},
		{"stdout a pipe", func(c *Cmd) { c.Stdout = pw }, true},
	} {
		c := &Cmd{Policy: base}
		c.prep = &preparation{notify: true}
		tc.edit(c)
		assert.Equal(t, tc.beside, c.walksBeside(), tc.what)
	}
}
