//go:build linux

package landlock

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// cacheTree is a home with a masked ~/.ssh and a missing deny-read ~/.kube,
// and a workspace, for a Cache whose settle time is short (testSettle).
type cacheTree struct {
	home, ws string
	p        modes.Policy
}

const testSettle = 50 * time.Millisecond

func newCacheTree(t *testing.T) cacheTree {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	tr := cacheTree{home: filepath.Join(base, "home"), ws: filepath.Join(base, "ws")}
	require.NoError(t, os.MkdirAll(filepath.Join(tr.home, ".ssh"), 0o755))
	require.NoError(t, os.MkdirAll(tr.ws, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tr.home, ".ssh/id_ed25519"), []byte("SECRET-7c1f"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(tr.home, ".bashrc"), []byte("PLAIN-42aa"), 0o644))
	tr.p = modes.Policy{Mode: modes.WorkspaceWrite, Workspace: tr.ws, WritableRoots: []string{tr.ws},
		DenyRead: []string{filepath.Join(tr.home, ".ssh"), filepath.Join(tr.home, ".kube")}}
	return tr
}

// kept builds p in c until its derivation is kept (a directory on the way,
// /tmp say, may have changed within the settle time: then it is not) and
// returns the entry.
func kept(t *testing.T, c *Cache, p modes.Policy, abi int, o ...Options) *entry {
	t.Helper()
	var opts Options
	if len(o) > 0 {
		opts = o[0]
	}
	for range 40 {
		time.Sleep(testSettle + 10*time.Millisecond)
		_, f, err := c.Build(p, abi, opts)
		require.NoError(t, err)
		f.Close()
		if e := c.lookup(p, abi, opts); e != nil {
			return e
		}
	}
	t.Fatal("the ruleset was never kept")
	return nil
}

// lookup returns the entry kept for p, abi and o, or nil.
func (c *Cache) lookup(p modes.Policy, abi int, o Options) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.key == cacheKey(p, abi, o) {
			return e
		}
	}
	return nil
}

// TestCacheReuses: an unchanged tree gets the kept derivation, built anew
// (a ruleset of its own), which confines as a new one does.
func TestCacheReuses(t *testing.T) {
	abi := requireABI(t)
	tr := newCacheTree(t)
	c := &Cache{settle: testSettle}
	defer c.Close()
	e := kept(t, c, tr.p, abi)
	rs, f, err := c.Build(tr.p, abi, Options{})
	require.NoError(t, err)
	defer f.Close()
	assert.Same(t, e, c.lookup(tr.p, abi, Options{}), "derived anew")
	assert.Equal(t, e.rs.Rules(), rs.Rules())
	out, err := restrictedCat(t, f, filepath.Join(tr.home, ".ssh/id_ed25519"), filepath.Join(tr.home, ".bashrc"))
	require.NoError(t, err)
	assert.NotContains(t, out, "SECRET-7c1f")
	assert.Contains(t, out, "PLAIN-42aa")
}

// TestCacheRulesetsAreOwn: each Build of a kept derivation is a ruleset of
// its own: a rule a runner adds to one (its view's fresh mounts) is not in
// the next.
func TestCacheRulesetsAreOwn(t *testing.T) {
	abi := requireABI(t)
	tr := newCacheTree(t)
	other := filepath.Join(filepath.Dir(tr.ws), "other")
	require.NoError(t, os.Mkdir(other, 0o755))
	c := &Cache{settle: testSettle}
	defer c.Close()
	kept(t, c, tr.p, abi)
	rs, first, err := c.Build(tr.p, abi, Options{})
	require.NoError(t, err)
	defer first.Close()
	pfd, err := unix.Open(other, unix.O_PATH|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(pfd)
	require.NoError(t, addPathBeneath(int(first.Fd()), &unix.LandlockPathBeneathAttr{Allowed_access: rs.WritableDir(other).Access, Parent_fd: int32(pfd)}))
	_, next, err := c.Build(tr.p, abi, Options{})
	require.NoError(t, err)
	defer next.Close()
	_, err = restrictedRun(t, next, "/bin/touch", filepath.Join(other, "planted"))
	require.NoError(t, err)
	assert.NoFileExists(t, filepath.Join(other, "planted"), "a rule added to one command's ruleset reached the next")
	_, err = restrictedRun(t, first, "/bin/touch", filepath.Join(other, "allowed"))
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(other, "allowed"), "the added rule did not take (the test proves nothing)")
}

// TestCacheRebuildsOnChange: each change of what the ruleset was made from
// makes the next Build derive and build it anew, and the new one confines
// the tree as it is: a deny-read path made since is masked, a file made
// since in a listed directory is readable, a replaced workspace writable.
func TestCacheRebuildsOnChange(t *testing.T) {
	abi := requireABI(t)
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, tr cacheTree)
		// check runs on the new ruleset.
		check func(t *testing.T, tr cacheTree, f *os.File)
	}{
		{"deny-read path made", func(t *testing.T, tr cacheTree) {
			require.NoError(t, os.MkdirAll(filepath.Join(tr.home, ".kube"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(tr.home, ".kube/config"), []byte("KUBE-SECRET-9e"), 0o644))
		}, func(t *testing.T, tr cacheTree, f *os.File) {
			out, err := restrictedCat(t, f, filepath.Join(tr.home, ".kube/config"))
			require.NoError(t, err)
			assert.NotContains(t, out, "KUBE-SECRET-9e")
		}},
		{"file made in a listed directory", func(t *testing.T, tr cacheTree) {
			require.NoError(t, os.WriteFile(filepath.Join(tr.home, ".newrc"), []byte("NEW-77"), 0o644))
		}, func(t *testing.T, tr cacheTree, f *os.File) {
			out, err := restrictedCat(t, f, filepath.Join(tr.home, ".newrc"))
			require.NoError(t, err)
			assert.Contains(t, out, "NEW-77")
		}},
		{"deny-read path removed", func(t *testing.T, tr cacheTree) {
			require.NoError(t, os.RemoveAll(filepath.Join(tr.home, ".ssh")))
		}, nil},
		{"workspace replaced", func(t *testing.T, tr cacheTree) {
			require.NoError(t, os.Rename(tr.ws, tr.ws+".old"))
			require.NoError(t, os.Mkdir(tr.ws, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(tr.ws, "f"), []byte("WS-31"), 0o644))
		}, func(t *testing.T, tr cacheTree, f *os.File) {
			out, err := restrictedCat(t, f, filepath.Join(tr.ws, "f"))
			require.NoError(t, err)
			assert.Contains(t, out, "WS-31")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newCacheTree(t)
			c := &Cache{settle: testSettle}
			defer c.Close()
			e := kept(t, c, tr.p, abi)
			tc.change(t, tr)
			_, f, err := c.Build(tr.p, abi, Options{})
			require.NoError(t, err)
			defer f.Close()
			assert.NotSame(t, e, c.lookup(tr.p, abi, Options{}), "the stale derivation was used again")
			assert.Nil(t, e.seen.mounts, "the stale derivation's mount table is still open")
			if tc.check != nil {
				tc.check(t, tr, f)
			}
		})
	}
}

// TestCacheRebuildsOnMount: a mount anywhere (here, on a directory the
// ruleset does not even name) makes the kept ruleset stale: a mount can
// change what a path's rule binds to.
func TestCacheRebuildsOnMount(t *testing.T) {
	abi := requireABI(t)
	if os.Getuid() != 0 {
		t.Skip("mounting needs root; the root run covers this")
	}
	tr := newCacheTree(t)
	mnt := t.TempDir() // (made before: a new directory on the way is a change too)
	c := &Cache{settle: testSettle}
	defer c.Close()
	e := kept(t, c, tr.p, abi)
	require.NoError(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, ""))
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	// Let the runtime's netpoller run: had it watched the kept mount
	// table, its epoll_wait would take the kernel's one report of the
	// change (seen: 1 run in 8 without this, every run with it).
	time.Sleep(20 * time.Millisecond)
	_, f, err := c.Build(tr.p, abi, Options{})
	require.NoError(t, err)
	f.Close()
	assert.NotSame(t, e, c.lookup(tr.p, abi, Options{}), "the derivation was used again after a mount")
}

// TestCacheKeepsOnlySettled: a directory the derivation listed that changed
// within the settle time cannot vouch for its entries (a change in the same
// timer tick would not show): that derivation is not kept.
func TestCacheKeepsOnlySettled(t *testing.T) {
	abi := requireABI(t)
	tr := newCacheTree(t)
	c := &Cache{settle: time.Hour}
	defer c.Close()
	_, f, err := c.Build(tr.p, abi, Options{})
	require.NoError(t, err)
	f.Close()
	assert.Nil(t, c.lookup(tr.p, abi, Options{}))
}

// TestCacheBound: at most cacheEntries derivations are kept, one per
// policy, ABI and options; those that fall out are closed.
func TestCacheBound(t *testing.T) {
	abi := requireABI(t)
	tr := newCacheTree(t)
	c := &Cache{settle: testSettle}
	defer c.Close()
	first := kept(t, c, tr.p, abi)
	for port := range uint16(cacheEntries) {
		kept(t, c, tr.p, abi, Options{ConnectTCP: []uint16{1000 + port}})
	}
	c.mu.Lock()
	n := len(c.entries)
	c.mu.Unlock()
	assert.LessOrEqual(t, n, cacheEntries)
	assert.Nil(t, c.lookup(tr.p, abi, Options{}))
	assert.Nil(t, first.seen.mounts, "an entry that fell out is still open")
}
