//go:build linux

package sandbox

import (
	"testing"

	"github.com/stretchr/testify/assert"

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
		want       seccomp.Spec
	}{
		{"notify, old landlock", false, true, 2, true, seccomp.Spec{Notify: true, Signals: true}}, // signals judged below ABI 6
		{"notify, network", true, true, 7, true, seccomp.Spec{Network: true, Notify: true}},
		{"no notify, abi 7", false, false, 7, true, seccomp.Spec{DenyIoctlOpen: true}},
		{"no notify, abi 3", true, false, 3, true, seccomp.Spec{Network: true, DenyIoctlOpen: true}},
		{"no notify, abi 2", false, false, 2, true, seccomp.Spec{DenyIoctlOpen: true, DenyTruncate: true}},
		{"no notify, abi 1", false, false, 1, true, seccomp.Spec{DenyIoctlOpen: true, DenyTruncate: true}},
		// Without Landlock only a mount view confines: nothing to add.
		{"no notify, no landlock", false, false, 0, false, seccomp.Spec{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := modes.Policy{Mode: modes.ReadOnly, Network: tc.network}
			s := filterSpec(p, tc.notify, tc.abi, tc.landlockOK)
			assert.Equal(t, tc.want, s)
			_, err := seccomp.Program(s)
			assert.NoError(t, err)
		})
	}
}
