package modes

import (
	"errors"
	"math"
	"strings"
	"testing"
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
			if err != nil || got != tc.want {
				t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
			continue
		}
		if !errors.Is(err, ErrLimits) {
			t.Errorf("ParseSize(%q) = %d, %v; want an ErrLimits error", tc.in, got, err)
		}
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
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrLimits) || !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("Validate() = %v, want an ErrLimits error naming %s", err, tc.flag)
			}
		})
	}
}

func TestDefaultLimits(t *testing.T) {
	total, err := memTotal()
	if err != nil {
		t.Fatal(err)
	}
	l := DefaultLimits()
	if l.MaxPids != DefaultPids || l.MaxMemory != total/2 || l.MaxCPU != 0 {
		t.Fatalf("DefaultLimits() = %+v, want pids %d, memory %d (half of MemTotal), cpu 0", l, DefaultPids, total/2)
	}
	if !l.Any() || (Limits{}).Any() {
		t.Fatalf("Any: defaults %v, zero %v", l.Any(), (Limits{}).Any())
	}
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
					if !errors.Is(err, ErrLimits) {
						t.Fatalf("Derive = %v, want ErrLimits", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if p.Limits != tc.want {
					t.Fatalf("Limits = %+v, want %+v", p.Limits, tc.want)
				}
				p.Limits.MaxMemory = -1
				if err := p.Validate(); !errors.Is(err, ErrInvalidPolicy) || !errors.Is(err, ErrLimits) {
					t.Fatalf("Validate with a negative limit = %v, want ErrInvalidPolicy and ErrLimits", err)
				}
			})
		}
	}
}
