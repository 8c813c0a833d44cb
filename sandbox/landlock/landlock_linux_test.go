package landlock

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func TestForABIDowngrade(t *testing.T) {
	p := modes.Policy{Mode: modes.WorkspaceWrite, Workspace: "/w", WritableRoots: []string{"/w", "/tmp"}}
	for _, tc := range []struct {
		abi                      int
		refer, trunc, ioctl, rsu bool
		net                      uint64
		scoped                   uint64
	}{
		{1, false, false, false, false, 0, 0},
		{2, true, false, false, false, 0, 0},
		{3, true, true, false, false, 0, 0},
		{4, true, true, false, false, unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, 0},
		{5, true, true, true, false, unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, 0},
		{6, true, true, true, false, unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP,
			unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL},
		{9, true, true, true, true, unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP,
			unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL},
		{10, true, true, true, true, unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP |
			accessNetBindUDP | accessNetConnectSendUDP,
			unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL},
	} {
		rs := ForABI(p, tc.abi)
		has := func(bit uint64) bool { return rs.handledFS&bit != 0 }
		assert.True(t, has(unix.LANDLOCK_ACCESS_FS_WRITE_FILE), "abi %d always handles writes", tc.abi)
		assert.Equal(t, tc.refer, has(unix.LANDLOCK_ACCESS_FS_REFER), "abi %d refer", tc.abi)
		assert.Equal(t, tc.trunc, has(unix.LANDLOCK_ACCESS_FS_TRUNCATE), "abi %d truncate", tc.abi)
		assert.Equal(t, tc.ioctl, has(unix.LANDLOCK_ACCESS_FS_IOCTL_DEV), "abi %d ioctl", tc.abi)
		assert.Equal(t, tc.rsu, has(accessFSResolveUnix), "abi %d resolve-unix", tc.abi)
		assert.Equal(t, tc.net, rs.handledNet, "abi %d net", tc.abi)
		assert.Equal(t, tc.scoped, rs.scoped, "abi %d scopes", tc.abi)
		assert.Equal(t, tc.abi, rs.Features().ABI)
		// Every rule stays non-empty after intersecting with the ABI.
		for _, r := range rs.rules {
			assert.NotZero(t, r.access&rs.handledFS, "abi %d rule %s", tc.abi, r.path)
		}
	}
}

func TestNetworkAllowedHandlesNoNet(t *testing.T) {
	rs := ForABI(modes.Policy{Mode: modes.ReadOnly, Network: true}, 10)
	assert.Zero(t, rs.handledNet)
	assert.Equal(t, uint64(unix.LANDLOCK_SCOPE_SIGNAL), rs.scoped, "signals stay scoped")
	assert.Zero(t, rs.handledFS&accessFSResolveUnix)
}

func TestReadOnlyHasNoWritableDirRule(t *testing.T) {
	rs := ForABI(modes.Policy{Mode: modes.ReadOnly, Workspace: "/w"}, 7)
	for _, r := range rs.rules {
		if r.access&unix.LANDLOCK_ACCESS_FS_MAKE_REG != 0 {
			t.Errorf("read-only policy grants file creation under %s", r.path)
		}
	}
}

func TestFeaturesNames(t *testing.T) {
	assert.Equal(t, []string{"filesystem"}, FeaturesOf(1).Names())
	assert.Equal(t, []string{"filesystem", "refer", "truncate", "tcp", "ioctl-dev", "scopes", "audit"}, FeaturesOf(7).Names())
}

// requireABI returns the kernel's ABI, or skips the test without Landlock
// (fails it when DSH_REQUIRE_LANDLOCK=1).
func requireABI(t *testing.T) int {
	t.Helper()
	v, err := ABI()
	if err != nil {
		if os.Getenv("DSH_REQUIRE_LANDLOCK") == "1" {
			t.Fatalf("DSH_REQUIRE_LANDLOCK=1 but %v", err)
		}
		t.Skipf("no Landlock on this host: %v", err)
	}
	return v
}

func TestABIMatchesKernel(t *testing.T) {
	v := requireABI(t)
	assert.GreaterOrEqual(t, v, 1)
	assert.Equal(t, 8, int(rulesetAttrSize(1)))
	assert.Equal(t, 24, int(rulesetAttrSize(7)))
}

// The ruleset attribute passed to an ABI-10 kernel is the full struct
// landlock_ruleset_attr of that ABI (six 64-bit fields); older ABIs get the
// prefix they know.
func TestRulesetAttrSize(t *testing.T) {
	assert.Equal(t, uintptr(48), rulesetAttrSize(10))
	assert.Equal(t, uintptr(24), rulesetAttrSize(9))
	assert.Equal(t, uintptr(8), rulesetAttrSize(1))
}

// A rule's kind comes from a directory listing and spares Build an fstat;
// an entry that was a directory when listed and is a file by Build still
// gets its (file) rule, and one that never existed none.
func TestBuildKindChanged(t *testing.T) {
	v := requireABI(t)
	d := t.TempDir()
	file := filepath.Join(d, "was-a-dir")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	rs := Ruleset{features: FeaturesOf(v), handledFS: handledFS(v), rules: []rule{
		{path: file, access: fsRead, kind: kindDir},
		{path: d, access: fsRead, kind: kindDir},
		{path: filepath.Join(d, "gone"), access: fsRead, kind: kindOther},
	}}
	f, err := rs.Build()
	require.NoError(t, err)
	f.Close()
}

// TestBeneath: the rules on a directory and beneath it, their access reduced
// to what the ruleset handles, and to file rights on a file.
func TestBeneath(t *testing.T) {
	// (Not under /tmp: a writable root of its own, which would hold the
	// workspace's rights, not a rule on it.)
	dir, err := os.MkdirTemp("/var/tmp", "dsh-beneath-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	ws, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".envrc"), nil, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "README"), nil, 0o644))
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws})
	require.NoError(t, err)
	for _, abi := range []int{1, 2, 7} {
		plain := ForABI(p, abi).Beneath(ws)
		require.Len(t, plain, 1, "one rule on the workspace: %v", plain)
		assert.Equal(t, Rule{Path: ws, Access: (fsRead | fsWrite) & handledFS(abi)}, plain[0])

		carved := ForABIWith(p, abi, Options{CarveProtected: true}).Beneath(ws)
		require.Greater(t, len(carved), 1)
		for _, r := range carved {
			assert.True(t, modes.Within(r.Path, ws), r.Path)
			assert.NotEqual(t, ws, r.Path, "carved: the workspace itself gets no write rule")
			assert.Zero(t, r.Access&^handledFS(abi), r.Path)
			if r.Path == filepath.Join(ws, ".envrc") {
				t.Errorf("the protected .envrc is granted: %v", r)
			}
			if fi, err := os.Stat(r.Path); err == nil && !fi.IsDir() {
				assert.Zero(t, r.Access&^fsFile, "file rights only on the file %s", r.Path)
			}
		}
	}
	assert.Empty(t, ForABI(p, 7).Beneath(filepath.Join(ws, "missing")))
}
