package modes

import (
	"errors"
	"fmt"
)

// Mode is a sandbox mode. The zero value is ReadOnly, the fail-safe default.
type Mode int

const (
	// ReadOnly: read and execute anywhere; write only to the device sinks.
	ReadOnly Mode = iota
	// WorkspaceWrite: ReadOnly plus writes under the writable roots
	// (workspace, /tmp, $TMPDIR, /dev/shm, extra roots), protected paths excepted.
	WorkspaceWrite
	// DangerFullAccess: no confinement at all.
	DangerFullAccess
)

// ErrUnknownMode is wrapped by Parse for a name that is not a mode.
var ErrUnknownMode = errors.New("unknown sandbox mode")

var names = [...]string{"read-only", "workspace-write", "danger-full-access"}

// All lists the modes in strictly increasing order of permission.
func All() []Mode { return []Mode{ReadOnly, WorkspaceWrite, DangerFullAccess} }

// String returns the mode's canonical name, e.g. "workspace-write".
func (m Mode) String() string {
	if m < 0 || int(m) >= len(names) {
		return fmt.Sprintf("mode(%d)", int(m))
	}
	return names[m]
}

// Valid reports whether m is one of the three modes.
func (m Mode) Valid() bool { return m >= ReadOnly && m <= DangerFullAccess }

// Parse returns the mode named s.
func Parse(s string) (Mode, error) {
	for i, n := range names {
		if s == n {
			return Mode(i), nil
		}
	}
	return ReadOnly, fmt.Errorf("%w %q (want read-only, workspace-write or danger-full-access)", ErrUnknownMode, s)
}

// MarshalText implements encoding.TextMarshaler.
func (m Mode) MarshalText() ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("%w %d", ErrUnknownMode, int(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Confines reports whether the mode confines the command at all.
func (m Mode) Confines() bool { return m != DangerFullAccess }

// StrictlyWider reports whether m grants strictly more than other.
func (m Mode) StrictlyWider(other Mode) bool { return m > other }

// Wider returns the modes strictly wider than m, narrowest first:
// read-only -> [workspace-write, danger-full-access];
// workspace-write -> [danger-full-access]; danger-full-access -> [].
func (m Mode) Wider() []Mode {
	var out []Mode
	for _, o := range All() {
		if o > m {
			out = append(out, o)
		}
	}
	return out
}

// EscalationTargets are the modes a model may ask to escalate to.
func EscalationTargets() []Mode { return []Mode{WorkspaceWrite, DangerFullAccess} }
