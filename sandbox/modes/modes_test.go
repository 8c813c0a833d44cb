package modes

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAndOrder(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  Mode
		wider []Mode
	}{
		{"read-only", ReadOnly, []Mode{WorkspaceWrite, DangerFullAccess}},
		{"workspace-write", WorkspaceWrite, []Mode{DangerFullAccess}},
		{"danger-full-access", DangerFullAccess, nil},
	} {
		t.Run(tc.in, func(t *testing.T) {
			m, err := Parse(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, m)
			assert.Equal(t, tc.in, m.String())
			assert.Equal(t, tc.wider, m.Wider())
			b, err := m.MarshalText()
			require.NoError(t, err)
			var back Mode
			require.NoError(t, back.UnmarshalText(b))
			assert.Equal(t, m, back)
		})
	}
	_, err := Parse("full")
	assert.ErrorIs(t, err, ErrUnknownMode)
	assert.True(t, DangerFullAccess.StrictlyWider(WorkspaceWrite))
	assert.False(t, ReadOnly.StrictlyWider(ReadOnly))
	assert.False(t, DangerFullAccess.Confines())
	assert.Equal(t, []Mode{WorkspaceWrite, DangerFullAccess}, EscalationTargets())
}

// outsideTmp returns a fresh directory that is not under /tmp (itself a
// writable root, which would absorb the roots a test derives).
func outsideTmp(t *testing.T) string {
	d, err := os.MkdirTemp("/var/tmp", "dsh-modes-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	d, err = filepath.EvalSymlinks(d)
	require.NoError(t, err)
	return d
}

func mkdir(t *testing.T, parts ...string) string {
	p := filepath.Join(parts...)
	require.NoError(t, os.MkdirAll(p, 0o755))
	return p
}

func TestDeriveWorkspaceWrite(t *testing.T) {
	base := outsideTmp(t)
	ws := mkdir(t, base, "ws")
	mkdir(t, ws, ".git", "hooks")
	extra := mkdir(t, base, "extra")
	link := filepath.Join(base, "wslink")
	require.NoError(t, os.Symlink(ws, link))

	p, err := Derive(Options{Mode: WorkspaceWrite, Workspace: link, AllowWrite: []string{extra}, Protect: []string{"secrets"}})
	require.NoError(t, err)
	assert.Equal(t, ws, p.Workspace, "workspace is canonical")
	assert.Contains(t, p.WritableRoots, ws)
	assert.Contains(t, p.WritableRoots, extra)
	assert.Contains(t, p.Protected, filepath.Join(ws, ".git/hooks"))
	assert.Contains(t, p.Protected, filepath.Join(ws, ".git/config"), "missing protected paths are kept")
	assert.Contains(t, p.Protected, filepath.Join(ws, "secrets"))

	for _, tc := range []struct {
		path string
		want bool
	}{
		{filepath.Join(ws, "a/b.txt"), true},
		{filepath.Join(ws, ".git/objects/x"), true},
		{filepath.Join(ws, ".git/hooks/pre-commit"), false},
		{filepath.Join(ws, ".git/config"), false},
		{filepath.Join(extra, "f"), true},
		{"/etc/passwd", false},
		{"/dev/null", true},
		{"/dev/pts/3", true},
		{"/dev/sda", false},
		{ws + "x/file", false},
	} {
		assert.Equal(t, tc.want, p.Writable(tc.path), tc.path)
	}
}

func TestDeriveReadOnlyAndDanger(t *testing.T) {
	ws := t.TempDir()
	p, err := Derive(Options{Mode: ReadOnly, Workspace: ws})
	require.NoError(t, err)
	assert.Empty(t, p.WritableRoots)
	assert.False(t, p.Writable(filepath.Join(p.Workspace, "f")))
	assert.True(t, p.Writable("/dev/null"))

	d, err := Derive(Options{Mode: DangerFullAccess, Workspace: ws})
	require.NoError(t, err)
	assert.True(t, d.Network)
	assert.True(t, d.Writable("/etc/passwd"))
}

func TestDeriveErrors(t *testing.T) {
	ws := t.TempDir()
	file := filepath.Join(ws, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, tc := range []struct {
		name string
		o    Options
		want error
	}{
		{"missing workspace", Options{Mode: WorkspaceWrite, Workspace: filepath.Join(ws, "nope")}, ErrWorkspace},
		{"workspace is a file", Options{Mode: ReadOnly, Workspace: file}, ErrWorkspace},
		{"missing writable root", Options{Mode: WorkspaceWrite, Workspace: ws, AllowWrite: []string{"/nonexistent-dsh"}}, ErrWritableRoot},
		{"bad mode", Options{Mode: Mode(7), Workspace: ws}, ErrUnknownMode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Derive(tc.o)
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

func TestGitWorktreeProtection(t *testing.T) {
	base := outsideTmp(t)
	ws := mkdir(t, base, "wt")
	gitdir := mkdir(t, base, "ws", ".git", "worktrees", "wt")
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: "+gitdir+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(gitdir, "commondir"), []byte("../..\n"), 0o644))
	p, err := Derive(Options{Mode: WorkspaceWrite, Workspace: ws, AllowWrite: []string{filepath.Join(base, "ws")}})
	require.NoError(t, err)
	assert.Contains(t, p.Protected, filepath.Join(ws, ".git"), "the .git pointer file is protected")
	assert.Contains(t, p.Protected, filepath.Join(base, "ws/.git/hooks"), "the common dir's hooks are protected")
	assert.Contains(t, p.Protected, filepath.Join(base, "ws/.git/config"))
}

func TestSymlinkedProtectedPath(t *testing.T) {
	base := outsideTmp(t)
	ws := mkdir(t, base, "ws")
	mkdir(t, ws, ".git")
	hooks := mkdir(t, base, "shared-hooks")
	require.NoError(t, os.Symlink(hooks, filepath.Join(ws, ".git/hooks")))
	p, err := Derive(Options{Mode: WorkspaceWrite, Workspace: ws, AllowWrite: []string{hooks}})
	require.NoError(t, err)
	assert.Contains(t, p.Protected, hooks, "where the link points")
	assert.Contains(t, p.Protected, filepath.Join(ws, ".git/hooks"), "the link itself")
	assert.False(t, p.Writable(filepath.Join(ws, ".git/hooks")), "the link cannot be replaced")
	assert.False(t, p.Writable(filepath.Join(hooks, "pre-commit")))
}

func TestWithin(t *testing.T) {
	assert.True(t, Within("/a/b", "/a"))
	assert.True(t, Within("/a", "/a"))
	assert.False(t, Within("/ab", "/a"))
	assert.True(t, Within("/x", "/"))
}
