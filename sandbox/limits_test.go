package sandbox

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func TestWithLimits(t *testing.T) {
	full := Enforcement{Level: levelFull, Layers: []string{layerLandlock}, Missing: []string{}}
	all := modes.Limits{MaxPids: 10, MaxMemory: 1 << 30, MaxCPU: 1}
	for _, tc := range []struct {
		name    string
		in      Enforcement
		l       modes.Limits
		mech    string
		level   string
		limits  string
		missing []string
	}{
		{"no limits asked", full, modes.Limits{}, limitsNone, levelFull, "", []string{}},
		{"cgroup v1", full, all, limitsCgroupV1, levelFull, limitsCgroupV1, []string{}},
		{"cgroup v2", full, all, limitsCgroupV2, levelFull, limitsCgroupV2, []string{}},
		{"rlimit: pids only", full, all, limitsRlimit, levelPartial, limitsRlimit, []string{missingMemoryLimit, missingCPULimit}},
		{"rlimit, defaults", full, modes.Limits{MaxPids: 4096, MaxMemory: 1 << 30}, limitsRlimit, levelPartial, limitsRlimit, []string{missingMemoryLimit}},
		{"none", full, all, limitsNone, levelPartial, limitsNone, []string{missingPidsLimit, missingMemoryLimit, missingCPULimit}},
		{"none, only cpu asked", full, modes.Limits{MaxCPU: 2}, limitsNone, levelPartial, limitsNone, []string{missingCPULimit}},
		{"danger-full-access stays none", Enforcement{Level: levelNone, Layers: []string{}, Missing: []string{}}, all, limitsNone, levelNone, limitsNone,
			[]string{missingPidsLimit, missingMemoryLimit, missingCPULimit}},
		{"already partial", Enforcement{Level: levelPartial, Missing: []string{missingIPCIsolation}}, all, limitsRlimit, levelPartial, limitsRlimit,
			[]string{missingIPCIsolation, missingMemoryLimit, missingCPULimit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Missing = slices.Clone(in.Missing)
			e := withLimits(in, tc.l, tc.mech)
			require.Equal(t, tc.level, e.Level, "withLimits: Level")
			require.Equal(t, tc.limits, e.Limits, "withLimits: Limits")
			require.Truef(t, slices.Equal(e.Missing, tc.missing), "withLimits: Missing = %v, want %v", e.Missing, tc.missing)
		})
	}
}
