//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/mountplan"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/landlock"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// TestFilterSpec: without user notification the kernel filter refuses what
// the notifier's guard would (a run there has no mount view whenever
// Landlock is the filesystem layer); with it, the supervisor decides.
func TestFilterSpec(t *testing.T) {
	for _, tc := range []struct {
		name       string
		network    bool
		notify     bool
		abi        int
		landlockOK bool
		metadata   bool // no mount view expected
		want       seccomp.Spec
	}{
		{"notify, old landlock", false, true, 2, true, false, seccomp.Spec{Notify: true, Signals: true}}, // signals judged below ABI 6
		{"notify, network", true, true, 7, true, false, seccomp.Spec{Network: true, Notify: true}},
		{"notify, no view expected", false, true, 7, true, true, seccomp.Spec{Notify: true, Metadata: true}},
		{"notify, no view expected, old landlock", true, true, 5, true, true, seccomp.Spec{Network: true, Notify: true, Signals: true, Metadata: true}},
		{"no notify, abi 7", false, false, 7, true, false, seccomp.Spec{DenyIoctlOpen: true}},
		{"no notify, abi 3", true, false, 3, true, false, seccomp.Spec{Network: true, DenyIoctlOpen: true}},
		{"no notify, abi 2", false, false, 2, true, false, seccomp.Spec{DenyIoctlOpen: true, DenyTruncate: true}},
		{"no notify, abi 1", false, false, 1, true, false, seccomp.Spec{DenyIoctlOpen: true, DenyTruncate: true}},
		// Nothing routes metadata changes without user notification.
		{"no notify, no view expected", false, false, 7, true, true, seccomp.Spec{DenyIoctlOpen: true}},
		// Without Landlock only a mount view confines: nothing to add.
		{"no notify, no landlock", false, false, 0, false, false, seccomp.Spec{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := modes.Policy{Mode: modes.ReadOnly, Network: tc.network}
			s := filterSpec(p, tc.notify, tc.abi, tc.landlockOK, tc.metadata)
			assert.Equal(t, tc.want, s)
			_, err := seccomp.Program(s)
			assert.NoError(t, err)
		})
	}
}

// TestMetadataFilterChoice: a confined preparation with user notification
// hands the runner two programs, the one for a runner without a mount view
// (which routes metadata changes to the supervisor) after the other, and
// names its size in the spec; the notifier gets the filter the runner says
// it loaded. Without notification, or when the command runs only with a
// mount view, there is one program.
func TestMetadataFilterChoice(t *testing.T) {
	ws := t.TempDir()
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws})
	require.NoError(t, err)
	prep, err := prepare(p, 0, nil, nil, nil, nil)
	require.NoError(t, err)
	defer prep.close()
	if !prep.notify {
		t.Skip("no seccomp user notification here")
	}
	require.NotNil(t, prep.noView)
	assert.False(t, prep.filterFor(true).Metadata)
	assert.True(t, prep.filterFor(false).Metadata)
	want, err := seccomp.Program(prep.filterFor(false))
	require.NoError(t, err)
	assert.Equal(t, want, prep.noView)
	assert.Equal(t, append(append([]byte(nil), prep.bpf...), prep.noView...), prep.programs())
	spec, err := prep.spec(true, "", 0, 0, 0, "", "")
	require.NoError(t, err)
	assert.Contains(t, string(spec), fmt.Sprintf("bpf2\x00%d\x00", len(prep.noView)))

	prep.noView = nil // as without notification
	assert.False(t, prep.filterFor(false).Metadata)
	assert.Equal(t, prep.bpf, prep.programs())
	spec, err = prep.spec(true, "", 0, 0, 0, "", "")
	require.NoError(t, err)
	assert.Contains(t, string(spec), "bpf2\x000\x00")
}

// TestSpecKeysMatchRunnerHeader: the option keys the supervisor writes into
// the runner's spec are exactly the KEY_ table of the runner's header
// (internal/runner/runner_linux.h), in the same order: a key added, renamed
// or removed on one side only fails here, not in a runner that ignores it.
func TestSpecKeysMatchRunnerHeader(t *testing.T) {
	h, err := os.ReadFile("internal/runner/runner_linux.h")
	require.NoError(t, err)
	var header []string
	for _, m := range regexp.MustCompile(`(?m)^#define KEY_\w+ "([^"]+)"`).FindAllSubmatch(h, -1) {
		header = append(header, string(m[1]))
	}
	require.NotEmpty(t, header, "no KEY_ defines in the header")

	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: t.TempDir()})
	require.NoError(t, err)
	prep, err := prepare(p, 0, nil, nil, nil, nil)
	require.NoError(t, err)
	defer prep.close()
	spec, err := prep.spec(true, "", 0, 0, 0, "", "")
	require.NoError(t, err)
	tok := strings.Split(string(spec), "\x00")
	require.Equal(t, "dsh2", tok[0])
	var keys []string
	for i := 1; i+1 < len(tok) && tok[i] != "ops"; i += 2 {
		keys = append(keys, tok[i])
	}
	assert.Equal(t, header, keys)
}

// TestPrepareMasks: the masks a preparation takes from its ruleset's
// derivation (built, then kept and checked) are mountplan.Masks's: every
// existing deny-read path, in a writable root or not, none that is missing.
func TestPrepareMasks(t *testing.T) {
	if _, err := landlock.ABI(); err != nil {
		if os.Getenv("DSH_REQUIRE_LANDLOCK") == "1" {
			t.Fatalf("DSH_REQUIRE_LANDLOCK=1 but %v", err)
		}
		t.Skipf("no Landlock (%v): the masks come from mountplan.Masks itself", err)
	}
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	for _, d := range []string{"home/.ssh", "ws/.aws"} {
		require.NoError(t, os.MkdirAll(filepath.Join(base, d), 0o755))
	}
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws,
		DenyRead: []string{filepath.Join(base, "home/.ssh"), filepath.Join(base, "home/.kube"), filepath.Join(ws, ".aws")}})
	require.NoError(t, err)
	var c landlock.Cache
	defer c.Close()
	for range 2 {
		prep, err := prepare(p, 0, nil, nil, nil, &c)
		require.NoError(t, err)
		require.NotNil(t, prep.ruleset)
		assert.Equal(t, mountplan.Masks(p), prep.masks)
		assert.Contains(t, prep.masks, filepath.Join(ws, ".aws"))
		assert.NotContains(t, prep.masks, filepath.Join(base, "home/.kube"))
		prep.close()
	}
}
