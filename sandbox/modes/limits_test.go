package modes

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"4096", 4096, true},
		{"256M", 256 << 20, true},
		{"256m", 256 << 20, true},
		{"2G", 2 << 30, true},
		{"512MiB", 512 << 20, true},
		{"1.5G", 3 << 29, true},
		{"8k", 8 << 10, true},
		{"1T", 1 << 40, true},
		{"", 0, false},
		{"M", 0, false},
		{"-1M", 0, false},
		{"ten", 0, false},
		{"1X", 0, false},
		{"NaN", 0, false},
		{"99999999T", 0, false},
	} {
		got, err := ParseSize(tc.in)
		if tc.ok {
			assert.NoErrorf(t, err, "ParseSize(%q)", tc.in)
			assert.Equalf(t, tc.want, got, "ParseSize(%q)", tc.in)
			continue
		}
		assert.ErrorIsf(t, err, ErrLimits, "ParseSize(%q) = %d", tc.in, got)
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Limits
		flag string // "" when valid
	}{
		{"zero: unlimited", Limits{}, ""},
		{"defaults", DefaultLimits(), ""},
		{"negative pids", Limits{MaxPids: -1}, "max-pids"},
		{"negative memory", Limits{MaxMemory: -1}, "max-memory"},
		{"negative cpu", Limits{MaxCPU: -0.5}, "max-cpu"},
		{"NaN cpu", Limits{MaxCPU: math.NaN()}, "max-cpu"},
		{"infinite cpu", Limits{MaxCPU: math.Inf(1)}, "max-cpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.l.Validate()
			if tc.flag == "" {
				require.NoError(t, err, "Validate()")
				return
			}
			require.ErrorIs(t, err, ErrLimits, "Validate()")
			require.ErrorContains(t, err, tc.flag, "Validate(): the error should name the flag")
		})
	}
}

func TestDefaultLimits(t *testing.T) {
	total, err := memTotal()
	require.NoError(t, err)
	l := DefaultLimits()
	require.Equal(t, Limits{MaxPids: DefaultPids, MaxMemory: total / 2, MaxCPU: 0}, l, "DefaultLimits(): pids DefaultPids, memory half of MemTotal, cpu 0")
	require.True(t, l.Any(), "Any() of the defaults")
	require.False(t, (Limits{}).Any(), "Any() of the zero Limits")
}

func TestDeriveLimits(t *testing.T) {
	ws := t.TempDir()
	for _, tc := range []struct {
		name string
		in   *Limits
		want Limits
		err  bool
	}{
		{"nil: defaults", nil, DefaultLimits(), false},
		{"zero: unlimited", &Limits{}, Limits{}, false},
		{"given", &Limits{MaxPids: 50, MaxMemory: 256 << 20, MaxCPU: 1.5}, Limits{MaxPids: 50, MaxMemory: 256 << 20, MaxCPU: 1.5}, false},
		{"negative", &Limits{MaxPids: -3}, Limits{}, true},
	} {
		for _, m := range All() {
			t.Run(tc.name+"/"+m.String(), func(t *testing.T) {
				p, err := Derive(Options{Mode: m, Workspace: ws, Limits: tc.in, AllowBroadWorkspace: true})
				if tc.err {
					require.ErrorIs(t, err, ErrLimits, "Derive")
					return
				}
				require.NoError(t, err)
				require.Equal(t, tc.want, p.Limits, "Limits")
				p.Limits.MaxMemory = -1
				err = p.Validate()
				require.ErrorIs(t, err, ErrInvalidPolicy, "Validate with a negative limit")
				require.ErrorIs(t, err, ErrLimits, "Validate with a negative limit")
			})
		}
	}
}
