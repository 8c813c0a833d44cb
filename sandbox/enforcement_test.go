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
		{"everything", modes.WorkspaceWrite, layers{ns: allNS, mountView: true, freshProc: true, landlockABI: 7, seccomp: true, notify: true}, LevelFull, []string{}},
		// The supervisor performs the metadata changes without a mount view,
		// and judges IPC calls without an ipc namespace.
		{"no user namespaces", modes.WorkspaceWrite, layers{landlockABI: 7, seccomp: true, notify: true, metadata: true}, LevelPartial,
			[]string{MissingProtectedPaths, MissingProcessVisibility}},
		{"no user namespaces, read-only", modes.ReadOnly, layers{landlockABI: 7, seccomp: true, notify: true, metadata: true}, LevelPartial,
			[]string{MissingProcessVisibility}},
		// A filter that does not route them (a mount view was expected).
		{"no mount view, metadata not routed", modes.ReadOnly, layers{landlockABI: 7, seccomp: true, notify: true}, LevelPartial,
			[]string{MissingMetadataWrites, MissingProcessVisibility}},
		// Truncation is refused by the filter (the supervisor without a
		// mount view, the kernel without notify): nothing missing for it.
		{"no user namespaces, old landlock", modes.WorkspaceWrite, layers{landlockABI: 2, seccomp: true, notify: true, metadata: true}, LevelPartial,
			[]string{MissingProtectedPaths, MissingProcessVisibility}},
		// No user notification (Linux < 5.0): Landlock carves the
		// protected paths, nothing reports or emulates.
		{"no notify, old landlock", modes.WorkspaceWrite, layers{landlockABI: 2, seccomp: true, carved: true}, LevelPartial,
			[]string{MissingMetadataWrites, MissingProcessVisibility, MissingSignalIsolation, MissingIPCIsolation, MissingDenialFacts}},
		{"no landlock", modes.ReadOnly, layers{ns: allNS, mountView: true, freshProc: true, seccomp: true, notify: true}, LevelFull,
			[]string{}},
		{"no landlock, no fresh proc", modes.ReadOnly, layers{ns: allNS, mountView: true, seccomp: true, notify: true}, LevelPartial,
			[]string{MissingDeviceWrites, MissingProcessVisibility}},
		{"no landlock, no fresh proc, no notify", modes.ReadOnly, layers{ns: allNS, mountView: true, seccomp: true}, LevelPartial,
			[]string{MissingDeviceWrites, MissingProcessVisibility, MissingSignalIsolation, MissingDenialFacts}},
		{"no fresh proc", modes.ReadOnly, layers{ns: allNS, mountView: true, landlockABI: 7, seccomp: true, notify: true}, LevelPartial,
			[]string{MissingProcessVisibility}},
		{"no notify", modes.ReadOnly, layers{ns: allNS, mountView: true, freshProc: true, landlockABI: 7, seccomp: true}, LevelPartial,
			[]string{MissingDenialFacts}},
		{"no notify: landlock carves the protected paths", modes.WorkspaceWrite, layers{landlockABI: 7, seccomp: true, carved: true}, LevelPartial,
			[]string{MissingMetadataWrites, MissingProcessVisibility, MissingIPCIsolation, MissingDenialFacts}},
		{"no notify: a protected path not carved", modes.WorkspaceWrite, layers{landlockABI: 7, seccomp: true}, LevelPartial,
			[]string{MissingProtectedPaths, MissingMetadataWrites, MissingProcessVisibility, MissingIPCIsolation, MissingDenialFacts}},
		{"no notify, old landlock: nothing judges signals", modes.ReadOnly, layers{landlockABI: 5, seccomp: true}, LevelPartial,
			[]string{MissingMetadataWrites, MissingProcessVisibility, MissingSignalIsolation, MissingIPCIsolation, MissingDenialFacts}},
		// Docker's default seccomp profile: a supervisor (the listener by
		// SCM_RIGHTS, sockets replaced without pidfd_getfd), no namespace.
		{"docker", modes.WorkspaceWrite, layers{landlockABI: 7, seccomp: true, notify: true, metadata: true, secrets: true}, LevelPartial,
			[]string{MissingProtectedPaths, MissingProcessVisibility, MissingSecretMasksMount}},
		{"docker, read-only, old landlock: the supervisor judges signals", modes.ReadOnly, layers{landlockABI: 2, seccomp: true, notify: true, metadata: true, secrets: true}, LevelPartial,
			[]string{MissingProcessVisibility, MissingSecretMasksMount}},
		{"secrets, everything", modes.ReadOnly, layers{ns: allNS, mountView: true, freshProc: true, landlockABI: 7, seccomp: true, notify: true, secrets: true}, LevelFull,
			[]string{}},
		{"secrets, no mount view", modes.ReadOnly, layers{landlockABI: 7, seccomp: true, notify: true, metadata: true, secrets: true}, LevelPartial,
			[]string{MissingProcessVisibility, MissingSecretMasksMount}},
		{"secrets, no landlock", modes.WorkspaceWrite, layers{ns: allNS, mountView: true, freshProc: true, seccomp: true, notify: true, secrets: true}, LevelPartial,
			[]string{MissingSecretMasksLandlock}},
		{"danger", modes.DangerFullAccess, layers{secrets: true}, LevelNone, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := assess(tc.mode, tc.l)
			assert.Equal(t, tc.level, e.Level)
			assert.Equal(t, tc.missing, e.Missing)
		})
	}
}
