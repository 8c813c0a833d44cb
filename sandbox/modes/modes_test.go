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

// wantErr checks err: none when want is "", else one wrapping is whose
// message contains want. It reports whether an error was wanted.
func wantErr(t *testing.T, err, is error, want string) bool {
	t.Helper()
	if want == "" {
		require.NoError(t, err)
		return false
	}
	require.Error(t, err)
	assert.ErrorIs(t, err, is)
	assert.Contains(t, err.Error(), want)
	return true
}

// fakeHome makes a home with some secrets and some ordinary dotfiles.
func fakeHome(t *testing.T) string {
	t.Helper()
	h := filepath.Join(t.TempDir(), "home")
	for _, d := range []string{".ssh/sub", ".aws", ".config/gh", ".config/nvim"} {
		require.NoError(t, os.MkdirAll(filepath.Join(h, d), 0o700))
	}
	for _, f := range []string{".ssh/id_ed25519", ".ssh/known_hosts", ".ssh/sub/x", ".aws/credentials", ".bash_history", ".gitconfig", ".bashrc"} {
		require.NoError(t, os.WriteFile(filepath.Join(h, f), []byte("x"), 0o600))
	}
	require.NoError(t, os.Symlink("/etc/hostname", filepath.Join(h, ".ssh/link")))
	return h
}

func TestDenyReadSet(t *testing.T) {
	h := fakeHome(t)
	j := func(rel ...string) []string {
		var out []string
		for _, r := range rel {
			out = append(out, filepath.Join(h, r))
		}
		return out
	}
	defaults := func(except ...string) []string {
		var out []string
		for _, rel := range HomeSecrets() {
			skip := false
			for _, e := range except {
				skip = skip || e == rel
			}
			if !skip {
				out = append(out, filepath.Join(h, rel))
			}
		}
		return out
	}
	extra := filepath.Join(h, "proj/.env")
	tests := []struct {
		name        string
		root        bool
		deny, allow []string
		want        []string // nil: defaults
		add         []string // added to want
		err         string
	}{
		{name: "defaults", want: defaults()},
		{name: "root adds shadow", root: true, want: defaults(), add: append([]string{"/etc/gshadow", "/etc/shadow"}, RootSecrets()[2:]...)},
		{name: "deny adds", deny: []string{extra}, want: defaults(), add: []string{extra}},
		{name: "deny inside an entry is absorbed", deny: j(".ssh/id_ed25519"), want: defaults()},
		{name: "deny unclean is cleaned", deny: []string{h + "/proj/../proj/.env"}, want: defaults(), add: []string{extra}},
		{name: "allow removes an entry", allow: j(".ssh"), want: defaults(".ssh")},
		{name: "allow removes a missing entry", allow: j(".kube"), want: defaults(".kube")},
		{name: "allow removes an added entry", deny: []string{extra}, allow: []string{extra}, want: defaults()},
		{name: "allow under an entry splits it (symlinks left out)", allow: j(".ssh/known_hosts"), want: defaults(".ssh"),
			add: j(".ssh/id_ed25519", ".ssh/sub")},
		{name: "allow deep under an entry", allow: j(".ssh/sub/x"), want: defaults(".ssh"),
			add: j(".ssh/id_ed25519", ".ssh/known_hosts")},
		{name: "two allows in one entry", allow: j(".ssh/known_hosts", ".ssh/sub"), want: defaults(".ssh"), add: j(".ssh/id_ed25519")},
		{name: "allow outside the set", allow: j(".gitconfig"), err: "not in the deny-read set"},
		{name: "allow of an ancestor of entries", allow: j(".config"), err: "not in the deny-read set"},
		{name: "allow under a file entry", allow: j(".bash_history/x"), err: "not a directory"},
		{name: "relative deny", deny: []string{"proj/.env"}, err: "not an absolute path"},
		{name: "relative allow", allow: []string{".ssh"}, err: "not an absolute path"},
		{name: "empty deny", deny: []string{""}, err: "empty path"},
		{name: "deny of /", deny: []string{"/"}, err: "root directory"},
		{name: "deny under /proc", deny: []string{"/proc/self/environ"}, err: "provides it afresh"},
		{name: "deny under /dev", deny: []string{"/dev/shm/x"}, err: "provides it afresh"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := denyReadSet(newResolver(), []string{h}, tc.root, tc.deny, tc.allow)
			if wantErr(t, err, ErrDenyRead, tc.err) {
				return
			}
			assert.Equal(t, outermost(append(append([]string(nil), tc.want...), tc.add...)), got)
		})
	}
}

// TestDeriveDenyRead: the confined modes get the set of the homes Derive
// sees, danger-full-access none; a set that would hide the workspace or a
// writable root is refused, and so is a deny-read under danger-full-access.
func TestDeriveDenyRead(t *testing.T) {
	h := fakeHome(t)
	t.Setenv("HOME", h)
	ws := filepath.Join(h, "proj")
	require.NoError(t, os.Mkdir(ws, 0o755))
	tests := []struct {
		name string
		o    Options
		has  []string
		not  []string
		err  string
	}{
		{name: "read-only", o: Options{Mode: ReadOnly, Workspace: ws}, has: []string{h + "/.ssh", h + "/.bash_history"}},
		{name: "workspace-write in the home", o: Options{Mode: WorkspaceWrite, Workspace: ws}, has: []string{h + "/.aws"}},
		{name: "extra home", o: Options{Mode: ReadOnly, Workspace: ws, Homes: []string{"/nonexistent-home"}}, has: []string{"/nonexistent-home/.ssh", h + "/.ssh"}},
		{name: "allow", o: Options{Mode: ReadOnly, Workspace: ws, AllowRead: []string{h + "/.ssh"}}, has: []string{h + "/.aws"}, not: []string{h + "/.ssh"}},
		{name: "danger hides nothing", o: Options{Mode: DangerFullAccess, Workspace: ws}},
		{name: "danger with deny", o: Options{Mode: DangerFullAccess, Workspace: ws, DenyRead: []string{ws}}, err: "danger-full-access hides nothing"},
		{name: "deny of the workspace", o: Options{Mode: ReadOnly, Workspace: ws, DenyRead: []string{ws}}, err: "contains the workspace"},
		{name: "deny of an ancestor of the workspace", o: Options{Mode: ReadOnly, Workspace: ws, DenyRead: []string{h}}, err: "contains the workspace"},
		{name: "workspace in a default entry", o: Options{Mode: ReadOnly, Workspace: h + "/.ssh/sub"}, err: "contains the workspace " + h + "/.ssh/sub (--allow-read " + h + "/.ssh)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Derive(tc.o)
			if wantErr(t, err, ErrDenyRead, tc.err) {
				return
			}
			require.NoError(t, p.Validate())
			if tc.o.Mode == DangerFullAccess {
				assert.Empty(t, p.DenyRead)
			}
			for _, x := range tc.has {
				assert.Contains(t, p.DenyRead, x)
				assert.True(t, p.Masks(x+"/y"))
			}
			for _, x := range tc.not {
				assert.NotContains(t, p.DenyRead, x)
				assert.False(t, p.Masks(x))
			}
		})
	}
}

func TestValidateDenyRead(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	other, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	tests := []struct {
		name string
		p    Policy
		err  string
	}{
		{name: "ok", p: Policy{Mode: ReadOnly, Workspace: ws, DenyRead: []string{"/home/u/.ssh"}}},
		{name: "relative", p: Policy{Mode: ReadOnly, Workspace: ws, DenyRead: []string{"home/u/.ssh"}}, err: "not absolute"},
		{name: "unclean", p: Policy{Mode: ReadOnly, Workspace: ws, DenyRead: []string{"/home/u/../u/.ssh"}}, err: "not clean"},
		{name: "root", p: Policy{Mode: ReadOnly, Workspace: ws, DenyRead: []string{"/"}}, err: "root directory"},
		{name: "workspace", p: Policy{Mode: ReadOnly, Workspace: ws, DenyRead: []string{filepath.Dir(ws)}}, err: "contains the workspace"},
		{name: "writable root", p: Policy{Mode: WorkspaceWrite, Workspace: ws, WritableRoots: []string{ws, other}, DenyRead: []string{other}}, err: "contains the writable root " + other},
		{name: "danger", p: Policy{Mode: DangerFullAccess, DenyRead: []string{"/home/u/.ssh"}}, err: "danger-full-access with deny-read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, tc.p.Validate(), ErrInvalidPolicy, tc.err)
		})
	}
}
