package sandbox

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func TestWithLimits(t *testing.T) {
	full := Enforcement{Level: LevelFull, Layers: []string{LayerLandlock}, Missing: []string{}}
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
		{"no limits asked", full, modes.Limits{}, LimitsNone, LevelFull, "", []string{}},
		{"cgroup v1", full, all, LimitsCgroupV1, LevelFull, LimitsCgroupV1, []string{}},
		{"cgroup v2", full, all, LimitsCgroupV2, LevelFull, LimitsCgroupV2, []string{}},
		{"rlimit: pids only", full, all, LimitsRlimit, LevelPartial, LimitsRlimit, []string{MissingMemoryLimit, MissingCPULimit}},
		{"rlimit, defaults", full, modes.Limits{MaxPids: 4096, MaxMemory: 1 << 30}, LimitsRlimit, LevelPartial, LimitsRlimit, []string{MissingMemoryLimit}},
		{"none", full, all, LimitsNone, LevelPartial, LimitsNone, []string{MissingPidsLimit, MissingMemoryLimit, MissingCPULimit}},
		{"none, only cpu asked", full, modes.Limits{MaxCPU: 2}, LimitsNone, LevelPartial, LimitsNone, []string{MissingCPULimit}},
		{"danger-full-access stays none", Enforcement{Level: LevelNone, Layers: []string{}, Missing: []string{}}, all, LimitsNone, LevelNone, LimitsNone,
			[]string{MissingPidsLimit, MissingMemoryLimit, MissingCPULimit}},
		{"already partial", Enforcement{Level: LevelPartial, Missing: []string{MissingIPCIsolation}}, all, LimitsRlimit, LevelPartial, LimitsRlimit,
			[]string{MissingIPCIsolation, MissingMemoryLimit, MissingCPULimit}},
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
