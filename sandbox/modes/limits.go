package modes

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// Limits are the resource limits of one command (every mode, danger-full-access
// included: they bound resource exhaustion, not confinement). A zero field
// means unlimited.
type Limits struct {
	// MaxPids is the most processes and threads the command may have at once.
	MaxPids int `json:"maxPids"`
	// MaxMemory is the most memory, swap included, in bytes.
	MaxMemory int64 `json:"maxMemory"`
	// MaxCPU is the most CPU time per wall-clock time, in cores (1.5: one
	// and a half cores); 0 leaves CPU unlimited.
	MaxCPU float64 `json:"maxCpu"`
}

// DefaultPids is DefaultLimits' MaxPids: enough for a parallel build, far
// below what makes a host unable to fork.
const DefaultPids = 4096

// ErrLimits is wrapped by the errors of invalid limits.
var ErrLimits = errors.New("invalid resource limit")

// DefaultLimits are the limits of a command that asks for none: DefaultPids
// processes, half of the host's memory (MemTotal; unlimited when it cannot
// be read) and unlimited CPU.
func DefaultLimits() Limits {
	l := Limits{MaxPids: DefaultPids}
	if total, err := memTotal(); err == nil {
		l.MaxMemory = total / 2
	}
	return l
}

// Any reports whether some limit is set.
func (l Limits) Any() bool { return l.MaxPids != 0 || l.MaxMemory != 0 || l.MaxCPU != 0 }

// Validate checks that no limit is negative (or not a number).
func (l Limits) Validate() error {
	switch {
	case l.MaxPids < 0:
		return fmt.Errorf("%w: max-pids must not be negative, got %d", ErrLimits, l.MaxPids)
	case l.MaxMemory < 0:
		return fmt.Errorf("%w: max-memory must not be negative, got %d", ErrLimits, l.MaxMemory)
	case l.MaxCPU < 0 || math.IsNaN(l.MaxCPU) || math.IsInf(l.MaxCPU, 0):
		return fmt.Errorf("%w: max-cpu must be a non-negative number of cores, got %v", ErrLimits, l.MaxCPU)
	}
	return nil
}

// ParseSize parses a memory size: a number of bytes, or one with a binary
// suffix K, M, G or T (any case, an optional trailing "B" or "iB":
// "256M", "2G", "512MiB"); "0" is unlimited.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	u := strings.ToUpper(t)
	u = strings.TrimSuffix(strings.TrimSuffix(u, "IB"), "B")
	mult := int64(1)
	if n := len(u); n > 0 {
		switch u[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			u = u[:n-1]
		}
	}
	if u == "" {
		return 0, fmt.Errorf("%w: size %q: no number", ErrLimits, s)
	}
	v, err := strconv.ParseFloat(u, 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%w: size %q: want a non-negative number of bytes, optionally with K, M, G or T", ErrLimits, s)
	}
	b := v * float64(mult)
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("%w: size %q is too large", ErrLimits, s)
	}
	return int64(b), nil
}

// memTotal is /proc/meminfo's MemTotal in bytes.
func memTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("meminfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("meminfo: MemTotal: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("meminfo: no MemTotal")
}
