//go:build linux

package landlock

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

const anyRead = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_EXECUTE

// TestMaskedSiblingRules: no rule with a file-read right covers an existing
// masked path, nor any directory on the way from / down to it (they keep
// "/"'s READ_DIR only); every sibling along the way is granted read; a
// missing deny-read path splits nothing; a masked path in a writable root
// is left to the mount view (the root keeps its rights whole).
func TestMaskedSiblingRules(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	home := filepath.Join(base, "home/u")
	ws := filepath.Join(base, "ws")
	for _, d := range []string{".ssh", ".config/gh", ".config/nvim", "proj", "../other"} {
		require.NoError(t, os.MkdirAll(filepath.Join(home, d), 0o755))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".aws"), 0o755))
	for _, f := range []string{".ssh/id_ed25519", ".bashrc", ".gitconfig", ".netrc", ".config/gh/hosts.yml"} {
		require.NoError(t, os.WriteFile(filepath.Join(home, f), []byte("x"), 0o600))
	}
	masked := []string{filepath.Join(home, ".ssh"), filepath.Join(home, ".netrc"), filepath.Join(home, ".config/gh")}
	missing := filepath.Join(home, ".kube")
	inRoot := filepath.Join(ws, ".aws")
	p := modes.Policy{Mode: modes.WorkspaceWrite, Workspace: ws, WritableRoots: []string{ws},
		DenyRead: append([]string{missing, inRoot}, masked...)}
	assert.ElementsMatch(t, masked, Masked(p))

	rs := ForABI(p, 7)
	got := map[string]uint64{}
	for _, r := range rs.rules {
		got[r.path] |= r.access
	}
	for path, access := range got {
		if access&anyRead == 0 {
			continue
		}
		for _, m := range masked {
			assert.False(t, modes.Within(m, path), "rule on %s (%#x) covers the masked %s", path, access, m)
		}
	}
	assert.Equal(t, uint64(unix.LANDLOCK_ACCESS_FS_READ_DIR), got["/"], "/ stays listable, nothing more")
	for _, way := range []string{base, filepath.Join(base, "home"), home, filepath.Join(home, ".config")} {
		_, ok := got[way]
		assert.False(t, ok, "the way %s has a rule", way)
	}
	for _, sib := range []string{".bashrc", ".gitconfig", "proj", ".config/nvim", "../other"} {
		assert.Equal(t, uint64(fsRead), got[filepath.Join(home, sib)], sib)
	}
	assert.Equal(t, uint64(fsRead|fsWrite), got[ws], "a mask in a writable root does not split it")
	_, ok := got[filepath.Join(home, ".kube")]
	assert.False(t, ok)
	// The rules a split costs: about the entries along the ways.
	plain := ForABI(modes.Policy{Mode: modes.WorkspaceWrite, Workspace: ws, WritableRoots: []string{ws}}, 7)
	assert.Greater(t, rs.Rules(), plain.Rules())

	// danger-full-access masks nothing.
	assert.Empty(t, Masked(modes.Policy{Mode: modes.DangerFullAccess, DenyRead: masked}))
}

// TestMaskedReadDenied restricts a child process with the ruleset and
// reads: the masked file's bytes never come back, a sibling's do.
func TestMaskedReadDenied(t *testing.T) {
	abi := requireABI(t)
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	home := filepath.Join(base, "home")
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o755))
	secret, plain := "SECRET-7c1f0e", "PLAIN-42aa"
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh/id_ed25519"), []byte(secret), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".bashrc"), []byte(plain), 0o644))
	p := modes.Policy{Mode: modes.ReadOnly, Workspace: base, DenyRead: []string{filepath.Join(home, ".ssh")}}
	f, err := ForABI(p, abi).Build()
	require.NoError(t, err)
	defer f.Close()
	out, err := restrictedCat(t, f, filepath.Join(home, ".ssh/id_ed25519"), filepath.Join(home, ".bashrc"))
	require.NoError(t, err)
	assert.NotContains(t, out, secret)
	assert.Contains(t, out, plain)
	assert.Contains(t, out, "Permission denied")
}

// restrictedCat runs cat on paths from a thread restricted by the ruleset
// (Landlock and no_new_privs are per thread; the thread is never unlocked,
// so it ends with its goroutine) and returns cat's combined output.
func restrictedCat(t *testing.T, ruleset *os.File, paths ...string) (string, error) {
	t.Helper()
	return restrictedRun(t, ruleset, append([]string{"/bin/cat"}, paths...)...)
}

// restrictedRun is restrictedCat for any command argv.
func restrictedRun(t *testing.T, ruleset *os.File, argv ...string) (string, error) {
	t.Helper()
	type res struct {
		out string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with us
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			ch <- res{err: err}
			return
		}
		if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, ruleset.Fd(), 0, 0); e != 0 {
			ch <- res{err: e}
			return
		}
		out, _ := exec.Command(argv[0], argv[1:]...).CombinedOutput() // it may fail: its output says why
		ch <- res{out: string(out)}
	}()
	r := <-ch
	return r.out, r.err
}
