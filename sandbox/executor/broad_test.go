//go:build linux

package executor

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// TestExecutorRefusesBroadWorkspace: New and Resolve refuse a
// workspace-write workspace that is / or contains the command's $HOME,
// unless Config.AllowBroadWorkspace; a read-only executor may live in /.
func TestExecutorRefusesBroadWorkspace(t *testing.T) {
	_, err := New(Config{Mode: modes.WorkspaceWrite, Workspace: "/", SpillDir: t.TempDir()})
	require.ErrorIs(t, err, modes.ErrBroadWorkspace)
	var be *modes.BroadWorkspaceError
	require.True(t, errors.As(err, &be))
	assert.Equal(t, "/", be.Path)

	allowed := newTestExecutor(t, Config{Mode: modes.WorkspaceWrite, Workspace: "/", AllowBroadWorkspace: true})
	r, err := allowed.Resolve(Request{Command: "true"})
	require.NoError(t, err)
	assert.Equal(t, []string{"/"}, r.Policy.WritableRoots)

	ro := newTestExecutor(t, Config{Workspace: "/"})
	_, err = ro.Resolve(Request{Command: "true"})
	require.NoError(t, err, "read-only: nothing becomes writable")
	_, err = ro.Resolve(Request{Command: "true", Mode: ptr(modes.WorkspaceWrite)})
	assert.ErrorIs(t, err, modes.ErrBroadWorkspace, "escalated to workspace-write")

	// The command's $HOME (from the executor's environment) counts too. It
	// lies outside /tmp: a TMPDIR inside /tmp adds nothing and is not checked.
	home, err := os.MkdirTemp("/var/tmp", "dsh-home-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	home = canonical(t, home)
	ws := filepath.Join(home, "project")
	require.NoError(t, os.Mkdir(ws, 0o755))
	e := newTestExecutor(t, Config{Mode: modes.WorkspaceWrite, Workspace: ws,
		Environ: func() []string { return []string{"HOME=" + home, "PATH=/usr/bin:/bin"} }})
	_, err = e.Resolve(Request{Command: "true"})
	require.NoError(t, err)
	_, err = e.Resolve(Request{Command: "true", Session: &Session{ID: "s", Workspace: home}})
	require.ErrorIs(t, err, modes.ErrBroadWorkspace)
	assert.Contains(t, err.Error(), "refusing to make workspace "+home+" writable: it is the home directory")
	_, err = e.Resolve(Request{Command: "true", Env: map[string]string{"TMPDIR": home}})
	require.ErrorIs(t, err, modes.ErrBroadWorkspace, "a TMPDIR that is the home")
}

func canonical(t *testing.T, p string) string {
	t.Helper()
	c, err := filepath.EvalSymlinks(p)
	require.NoError(t, err)
	return c
}
