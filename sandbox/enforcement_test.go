package sandbox

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func TestAssess(t *testing.T) {
	allNS := Namespaces{User: true, Mount: true, PID: true, Net: true, IPC: true, UTS: true}
	for _, tc := range []struct {
		name    string
		mode    modes.Mode
		l       layers
		level   string
		missing []string
	}{
		{"everything", modes.WorkspaceWrite, layers{ns: allNS, mountView: true, freshProc: true, landlockABI: 7, seccomp: true, notify: true}, levelFull, []string{}},
		// The supervisor performs the metadata changes without a mount view,
		// and judges IPC calls without an ipc namespace.
		{"no user namespaces", modes.WorkspaceWrite, layers{landlockABI: 7, seccomp: true, notify: true, metadata: true}, levelPartial,
			[]string{missingProtectedPaths, missingProcessVisibility}},
		{"no user namespaces, read-only", modes.ReadOnly, layers{landlockABI: 7, seccomp: true, notify: true, metadata: true}, levelPartial,
			[]string{missingProcessVisibility}},
		// A filter that does not route them (a mount view was expected).
		{"no mount view, metadata not routed", modes.ReadOnly, layers{landlockABI: 7, seccomp: true, notify: true}, levelPartial,
			[]string{missingMetadataWrites, missingProcessVisibility}},
		// Truncation is refused by the filter (the supervisor without a
		// mount view, the kernel without notify): nothing missing for it.
		{"no user namespaces, old landlock", modes.WorkspaceWrite, layers{landlockABI: 2, seccomp: true, notify: true, metadata: true}, levelPartial,
			[]string{missingProtectedPaths, missingProcessVisibility}},
		// No user notification (Linux < 5.0): Landlock carves the
		// protected paths, nothing reports or emulates.
		{"no notify, old landlock", modes.WorkspaceWrite, layers{landlockABI: 2, seccomp: true, carved: true}, levelPartial,
			[]string{missingMetadataWrites, missingProcessVisibility, missingSignalIsolation, missingIPCIsolation, missingDenialFacts}},
		{"no landlock", modes.ReadOnly, layers{ns: allNS, mountView: true, freshProc: true, seccomp: true, notify: true}, levelFull,
			[]string{}},
		{"no landlock, no fresh proc", modes.ReadOnly, layers{ns: allNS, mountView: true, seccomp: true, notify: true}, levelPartial,
			[]string{missingDeviceWrites, missingProcessVisibility}},
		{"no landlock, no fresh proc, no notify", modes.ReadOnly, layers{ns: allNS, mountView: true, seccomp: true}, levelPartial,
			[]string{missingDeviceWrites, missingProcessVisibility, missingSignalIsolation, missingDenialFacts}},
		{"no fresh proc", modes.ReadOnly, layers{ns: allNS, mountView: true, landlockABI: 7, seccomp: true, notify: true}, levelPartial,
			[]string{missingProcessVisibility}},
		{"no notify", modes.ReadOnly, layers{ns: allNS, mountView: true, freshProc: true, landlockABI: 7, seccomp: true}, levelPartial,
			[]string{missingDenialFacts}},
		{"no notify: landlock carves the protected paths", modes.WorkspaceWrite, layers{landlockABI: 7, seccomp: true, carved: true}, levelPartial,
			[]string{missingMetadataWrites, missingProcessVisibility, missingIPCIsolation, missingDenialFacts}},
		{"no notify: a protected path not carved", modes.WorkspaceWrite, layers{landlockABI: 7, seccomp: true}, levelPartial,
			[]string{missingProtectedPaths, missingMetadataWrites, missingProcessVisibility, missingIPCIsolation, missingDenialFacts}},
		{"no notify, old landlock: nothing judges signals", modes.ReadOnly, layers{landlockABI: 5, seccomp: true}, levelPartial,
			[]string{missingMetadataWrites, missingProcessVisibility, missingSignalIsolation, missingIPCIsolation, missingDenialFacts}},
		// Docker's default seccomp profile: a supervisor (the listener by
		// SCM_RIGHTS, sockets replaced without pidfd_getfd), no namespace.
		{"docker", modes.WorkspaceWrite, layers{landlockABI: 7, seccomp: true, notify: true, metadata: true, secrets: true}, levelPartial,
			[]string{missingProtectedPaths, missingProcessVisibility, missingSecretMasksMount}},
		{"docker, read-only, old landlock: the supervisor judges signals", modes.ReadOnly, layers{landlockABI: 2, seccomp: true, notify: true, metadata: true, secrets: true}, levelPartial,
			[]string{missingProcessVisibility, missingSecretMasksMount}},
		{"secrets, everything", modes.ReadOnly, layers{ns: allNS, mountView: true, freshProc: true, landlockABI: 7, seccomp: true, notify: true, secrets: true}, levelFull,
			[]string{}},
		{"secrets, no mount view", modes.ReadOnly, layers{landlockABI: 7, seccomp: true, notify: true, metadata: true, secrets: true}, levelPartial,
			[]string{missingProcessVisibility, missingSecretMasksMount}},
		{"secrets, no landlock", modes.WorkspaceWrite, layers{ns: allNS, mountView: true, freshProc: true, seccomp: true, notify: true, secrets: true}, levelPartial,
			[]string{missingSecretMasksLandlock}},
		{"danger", modes.DangerFullAccess, layers{secrets: true}, levelNone, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := assess(tc.mode, tc.l)
			assert.Equal(t, tc.level, e.Level)
			assert.Equal(t, tc.missing, e.Missing)
		})
	}
}
