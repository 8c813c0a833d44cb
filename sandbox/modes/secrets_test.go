package modes

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
			got, err := denyReadSet([]string{h}, tc.root, tc.deny, tc.allow)
			if tc.err != "" {
				require.Error(t, err)
				assert.True(t, errors.Is(err, ErrDenyRead), "%v wraps ErrDenyRead", err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
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
			if tc.err != "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, ErrDenyRead)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
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
			err := tc.p.Validate()
			if tc.err == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidPolicy)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}
