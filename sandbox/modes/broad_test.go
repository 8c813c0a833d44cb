package modes

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeriveRefusesBroadDirectories: under workspace-write a workspace, an
// AllowWrite root or a TempDir that is /, a home directory or an ancestor
// of one is refused with a *BroadWorkspaceError; AllowBroadWorkspace lifts
// it for the workspace and the roots only; other modes never care.
func TestDeriveRefusesBroadDirectories(t *testing.T) {
	base := outsideTmp(t)
	home := mkdir(t, base, "users", "me")
	users := filepath.Dir(home)
	ws := mkdir(t, home, "project")
	homeLink := filepath.Join(base, "homelink")
	require.NoError(t, os.Symlink(home, homeLink))
	realHome, err := os.UserHomeDir()
	require.NoError(t, err)
	realHome = newResolver().canonical(realHome)

	for _, tc := range []struct {
		name       string
		o          Options
		kind, path string
		reason     string
		overridden bool // AllowBroadWorkspace makes it pass
	}{
		{"workspace /", Options{Workspace: "/"}, BroadWorkspace, "/", "it is the root directory", true},
		{"workspace is the home", Options{Workspace: home}, BroadWorkspace, home, "it is the home directory", true},
		{"workspace is the home through a symlink", Options{Workspace: homeLink}, BroadWorkspace, home, "it is the home directory", true},
		{"workspace contains the home", Options{Workspace: users}, BroadWorkspace, users, "it contains the home directory " + home, true},
		{"workspace is this process's $HOME", Options{Workspace: realHome, Homes: nil}, BroadWorkspace, realHome, "it is the home directory", true},
		{"allow-write /", Options{Workspace: ws, AllowWrite: []string{"/"}}, BroadWritableRoot, "/", "it is the root directory", true},
		{"allow-write the home", Options{Workspace: ws, AllowWrite: []string{home}}, BroadWritableRoot, home, "it is the home directory", true},
		{"TMPDIR /", Options{Workspace: ws, TempDir: "/"}, BroadTempDir, "/", "it is the root directory", false},
		{"TMPDIR the home", Options{Workspace: ws, TempDir: home}, BroadTempDir, home, "it is the home directory", false},
		{"TMPDIR an ancestor of the home", Options{Workspace: ws, TempDir: users}, BroadTempDir, users, "it contains the home directory " + home, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Mode = WorkspaceWrite
			if o.Homes == nil && tc.name != "workspace is this process's $HOME" {
				o.Homes = []string{home}
			}
			_, err := Derive(o)
			require.ErrorIs(t, err, ErrBroadWorkspace)
			var be *BroadWorkspaceError
			require.True(t, errors.As(err, &be))
			assert.Equal(t, tc.kind, be.Kind)
			assert.Equal(t, tc.path, be.Path)
			assert.Equal(t, tc.reason, be.Reason)
			assert.Equal(t, tc.overridden, be.Overridable())
			assert.Contains(t, err.Error(), tc.path)

			o.AllowBroadWorkspace = true
			p, err := Derive(o)
			if !tc.overridden {
				assert.ErrorIs(t, err, ErrBroadWorkspace, "a broad TMPDIR is refused even with AllowBroadWorkspace")
				return
			}
			require.NoError(t, err)
			assert.True(t, p.Writable(filepath.Join(tc.path, "notes.txt")), "the override makes it writable")
			assert.False(t, p.Writable(filepath.Join(tc.path, ".bashrc")), "but not its protected names")
			require.NoError(t, p.Validate())

			for _, m := range []Mode{ReadOnly, DangerFullAccess} {
				o.Mode, o.AllowBroadWorkspace = m, false
				_, err := Derive(o)
				assert.NoError(t, err, "%v: nothing of the workspace is writable there because of it", m)
			}
		})
	}

	t.Run("narrow directories pass", func(t *testing.T) {
		p, err := Derive(Options{Mode: WorkspaceWrite, Workspace: ws, AllowWrite: []string{mkdir(t, home, "cache")},
			TempDir: mkdir(t, home, "tmp"), Homes: []string{home}})
		require.NoError(t, err)
		assert.False(t, p.Writable(filepath.Join(home, ".bashrc")))
		assert.True(t, p.Writable(filepath.Join(home, "tmp", "x")), "a TMPDIR inside the home is fine")
	})
	t.Run("a TMPDIR inside /tmp is not checked", func(t *testing.T) {
		// HOME=/tmp (some services) must not make every workspace-write run fail
		_, err := Derive(Options{Mode: WorkspaceWrite, Workspace: ws, TempDir: "/tmp", Homes: []string{"/tmp"}})
		require.NoError(t, err)
	})
}

func TestValidate(t *testing.T) {
	base := outsideTmp(t)
	ws := mkdir(t, base, "ws")
	other := mkdir(t, base, "other")
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(ws, link))
	rw := func(p Policy) Policy {
		p.Mode = WorkspaceWrite
		if p.Workspace == "" {
			p.Workspace = ws
		}
		return p
	}
	for _, tc := range []struct {
		name string
		p    Policy
		want string // "" means valid
	}{
		{"read-only", Policy{Mode: ReadOnly, Workspace: ws}, ""},
		{"read-only with network", Policy{Mode: ReadOnly, Workspace: ws, Network: true}, ""},
		{"danger with anything", Policy{Mode: DangerFullAccess, Workspace: "rel", WritableRoots: []string{"x"}}, ""},
		{"workspace-write", rw(Policy{WritableRoots: []string{ws, other}, Protected: []string{ws + "/.git/hooks"}}), ""},
		{"workspace in a wider root", rw(Policy{WritableRoots: []string{base}}), ""},
		{"unknown mode", Policy{Mode: Mode(9), Workspace: ws}, "unknown sandbox mode 9"},
		{"read-only with writable roots", Policy{Mode: ReadOnly, Workspace: ws, WritableRoots: []string{other}}, "read-only mode with writable roots"},
		{"empty workspace", Policy{Mode: ReadOnly}, "workspace: empty path"},
		{"relative workspace", Policy{Mode: ReadOnly, Workspace: "ws"}, "not absolute"},
		{"unclean workspace", Policy{Mode: ReadOnly, Workspace: ws + "/./"}, "not clean"},
		{"symlinked workspace", Policy{Mode: ReadOnly, Workspace: link}, "not canonical"},
		{"missing workspace", Policy{Mode: ReadOnly, Workspace: ws + "-nope"}, "no such file"},
		{"no writable roots", rw(Policy{}), "without writable roots"},
		{"relative root", rw(Policy{WritableRoots: []string{ws, "tmp"}}), "writable root: \"tmp\" is not absolute"},
		{"unclean root", rw(Policy{WritableRoots: []string{ws, other + "/../other"}}), "not clean"},
		{"NUL in a root", rw(Policy{WritableRoots: []string{ws, "/tmp\x00"}}), "NUL"},
		{"symlinked root", rw(Policy{WritableRoots: []string{link}, Workspace: ws}), "not canonical"},
		{"workspace outside the roots", rw(Policy{WritableRoots: []string{other}}), "is in no writable root"},
		{"relative protected", rw(Policy{WritableRoots: []string{ws}, Protected: []string{".git/hooks"}}), "protected path: \".git/hooks\" is not absolute"},
		{"protected outside the roots", rw(Policy{WritableRoots: []string{ws}, Protected: []string{other + "/x"}}), "is in no writable root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidPolicy)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestDeriveIsValid: whatever Derive returns passes Validate.
func TestDeriveIsValid(t *testing.T) {
	base := outsideTmp(t)
	ws := mkdir(t, base, "ws")
	mkdir(t, ws, ".git", "hooks")
	extra := mkdir(t, base, "extra")
	for _, m := range All() {
		p, err := Derive(Options{Mode: m, Workspace: ws, AllowWrite: []string{extra}, Protect: []string{"secret", extra + "/p"},
			TempDir: mkdir(t, base, "tmpdir")})
		require.NoError(t, err)
		assert.NoError(t, p.Validate(), "%v: %+v", m, p)
	}
}
