package modes

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeriveProtectsNames: every ProtectedNames entry is protected at the top
// of the workspace and of each extra writable root (not of /tmp), existing or
// not, with everything beneath it; nested ones, their siblings and the
// workspace's other entries stay writable.
func TestDeriveProtectsNames(t *testing.T) {
	base := outsideTmp(t)
	ws := mkdir(t, base, "ws")
	extra := mkdir(t, base, "extra")
	mkdir(t, ws, ".vscode")
	p, err := Derive(Options{Mode: WorkspaceWrite, Workspace: ws, AllowWrite: []string{extra}})
	require.NoError(t, err)
	require.NoError(t, p.Validate())
	for _, n := range ProtectedNames() {
		for _, r := range []string{ws, extra} {
			assert.Contains(t, p.Protected, filepath.Join(r, n))
			assert.False(t, p.Writable(filepath.Join(r, n)), "%s in %s", n, r)
			assert.False(t, p.Writable(filepath.Join(r, n, "x")), "%s/x in %s", n, r)
		}
		assert.True(t, p.Writable(filepath.Join(ws, "sub", n)), "a nested %s", n)
		assert.True(t, p.Writable(filepath.Join(ws, n+".bak")), "%s.bak", n)
		assert.True(t, p.Writable(filepath.Join("/tmp", n)), "/tmp/%s", n)
	}
	for _, f := range []string{"README.md", ".gitignore", "src/main.go", ".git/HEAD", "node_modules/x/.npmrc"} {
		assert.True(t, p.Writable(filepath.Join(ws, f)), f)
	}
	assert.Equal(t, []string{ws, extra}, p.AuditedRoots())

	ro, err := Derive(Options{Mode: ReadOnly, Workspace: ws})
	require.NoError(t, err)
	assert.Empty(t, ro.Protected)
	assert.Empty(t, ro.AuditedRoots())
}

// TestDeriveProtectedNameSymlink: a protected name that is a symlink into a
// writable root is protected as the link and where it points.
func TestDeriveProtectedNameSymlink(t *testing.T) {
	base := outsideTmp(t)
	ws := mkdir(t, base, "ws")
	shared := mkdir(t, ws, "shared-settings")
	require.NoError(t, os.Symlink(shared, filepath.Join(ws, ".vscode")))
	p, err := Derive(Options{Mode: WorkspaceWrite, Workspace: ws})
	require.NoError(t, err)
	assert.Contains(t, p.Protected, filepath.Join(ws, ".vscode"))
	assert.Contains(t, p.Protected, shared)
	assert.False(t, p.Writable(filepath.Join(shared, "tasks.json")))
}

func TestUnprotect(t *testing.T) {
	base := outsideTmp(t)
	ws := mkdir(t, base, "ws")
	for _, tc := range []struct {
		name      string
		unprotect []string
		writable  []string // names made writable
		err       string
	}{
		{"none", nil, nil, ""},
		{"a name", []string{".vscode"}, []string{".vscode"}, ""},
		{"trailing slash and ./", []string{"./.idea/", ".envrc"}, []string{".idea", ".envrc"}, ""},
		{"named twice", []string{".envrc", ".envrc"}, []string{".envrc"}, ""},
		{"git hooks", []string{".git/hooks"}, nil, `cannot unprotect ".git/hooks": not one of the default protected names`},
		{"another path", []string{"src"}, nil, `cannot unprotect "src"`},
		{"absolute", []string{filepath.Join(ws, ".vscode")}, nil, "cannot unprotect"},
		{"empty", []string{""}, nil, `cannot unprotect ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Derive(Options{Mode: WorkspaceWrite, Workspace: ws, Unprotect: tc.unprotect})
			if wantErr(t, err, ErrUnprotect, tc.err) {
				return
			}
			for _, n := range ProtectedNames() {
				want := false
				for _, w := range tc.writable {
					want = want || w == n
				}
				assert.Equal(t, want, p.Writable(filepath.Join(ws, n)), n)
			}
		})
	}
}

// TestAuditedRoots: the workspace (or the root holding it) and the extra
// roots, never the scratch ones.
func TestAuditedRoots(t *testing.T) {
	base := outsideTmp(t)
	ws := mkdir(t, base, "ws")
	inner := mkdir(t, ws, "inner")
	for _, tc := range []struct {
		name string
		p    Policy
		want []string
	}{
		{"workspace", Policy{Mode: WorkspaceWrite, Workspace: ws, WritableRoots: []string{ws, "/tmp", "/dev/shm"}}, []string{ws}},
		{"a root holding it", Policy{Mode: WorkspaceWrite, Workspace: inner, WritableRoots: []string{ws}}, []string{ws}},
		{"in /tmp", Policy{Mode: WorkspaceWrite, Workspace: "/tmp/w", WritableRoots: []string{"/tmp"}}, []string{"/tmp/w"}},
		{"read-only", Policy{Mode: ReadOnly, Workspace: ws}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.p.AuditedRoots()) })
	}
}

// TestDerivePolicyDirs: dsh-sandbox's own policy and trust directories in
// each home stay read-only inside a writable root that holds them, existing
// or not, and a writable root inside one is refused.
func TestDerivePolicyDirs(t *testing.T) {
	home := outsideTmp(t)
	ws := mkdir(t, home, "ws")
	cfg := mkdir(t, home, ".config")
	state := filepath.Join(home, ".local", "state")
	require.NoError(t, os.MkdirAll(filepath.Join(state, "dsh-sandbox"), 0o755))
	p, err := Derive(Options{Mode: WorkspaceWrite, Workspace: ws, AllowWrite: []string{cfg, filepath.Join(home, ".local")}, Homes: []string{home}})
	require.NoError(t, err)
	for _, d := range PolicyDirs(home) {
		assert.True(t, p.Protects(d), "%s protected", d)
		assert.True(t, p.Protects(filepath.Join(d, "config.toml")), "%s/config.toml protected", d)
	}
	assert.False(t, p.Protects(filepath.Join(cfg, "other")), "the rest of the root stays writable")

	_, err = Derive(Options{Mode: WorkspaceWrite, Workspace: ws, AllowWrite: []string{filepath.Join(state, "dsh-sandbox")}, Homes: []string{home}})
	require.ErrorIs(t, err, ErrWritableRoot)
	assert.ErrorContains(t, err, "dsh-sandbox's own policy directory")
}
