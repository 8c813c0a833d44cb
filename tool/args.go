package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Args are the bash tool's arguments as the model gives them, decoded and
// validated. Only these keys are read: an unknown key is ignored, and none
// can set a trusted request field (env, stdin, stdoutMaxBytes, dshEnv).
type Args struct {
	Command     string
	Description string
	// TimeoutMs is nil when the model gave none.
	TimeoutMs       *float64
	Workdir         string
	RunInBackground bool
	// Escalation is the mode asked for with sandbox_permissions, or nil.
	Escalation    *modes.Mode
	Justification string
}

// The keys the model may set.
const (
	keyCommand       = "command"
	keyDescription   = "description"
	keyTimeoutMs     = "timeoutMs"
	keyWorkdir       = "workdir"
	keyBackground    = "run_in_background"
	keyPermissions   = "sandbox_permissions"
	keyJustification = "justification"
)

// DecodeArgs decodes and validates the model's JSON arguments. The error
// text is the message the model sees after "Error: ".
func DecodeArgs(raw json.RawMessage) (Args, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Args{}, fmt.Errorf("invalid arguments: expected a JSON object")
	}
	var a Args
	var ok bool
	if a.Command, ok = nonEmptyString(fields[keyCommand]); !ok {
		return Args{}, fmt.Errorf("invalid command: expected a non-empty string")
	}
	if a.Description, ok = nonEmptyString(fields[keyDescription]); !ok {
		return Args{}, fmt.Errorf("invalid description: expected a non-empty string")
	}
	if v, present := fields[keyTimeoutMs]; present && !isNull(v) {
		f, ok := positiveNumber(v)
		if !ok {
			return Args{}, fmt.Errorf("invalid timeoutMs: expected a positive number, got %s", compact(v))
		}
		a.TimeoutMs = &f
	}
	if v, present := fields[keyWorkdir]; present && !isNull(v) {
		if err := json.Unmarshal(v, &a.Workdir); err != nil {
			return Args{}, fmt.Errorf("invalid workdir: expected a string, got %s", compact(v))
		}
	}
	if v, present := fields[keyBackground]; present && !isNull(v) {
		if err := json.Unmarshal(v, &a.RunInBackground); err != nil {
			return Args{}, fmt.Errorf("invalid run_in_background: expected a boolean, got %s", compact(v))
		}
	}
	perm, hasPerm := fields[keyPermissions]
	hasPerm = hasPerm && !isNull(perm)
	just, hasJust := fields[keyJustification]
	hasJust = hasJust && !isNull(just)
	switch {
	case hasPerm && !hasJust:
		return Args{}, fmt.Errorf("invalid escalation: sandbox_permissions requires a justification")
	case hasJust && !hasPerm:
		return Args{}, fmt.Errorf("invalid escalation: justification is only valid together with sandbox_permissions")
	case hasPerm:
		if a.Justification, ok = nonEmptyString(just); !ok {
			return Args{}, fmt.Errorf("invalid justification: expected a non-empty sentence")
		}
		var name string
		m, err := modes.Mode(0), json.Unmarshal(perm, &name)
		if err == nil {
			m, err = modes.Parse(name)
		}
		if err != nil || !isEscalationTarget(m) {
			return Args{}, fmt.Errorf("invalid sandbox_permissions: expected %s, got %s", targetList(), compact(perm))
		}
		a.Escalation = &m
	}
	return a, nil
}

func isEscalationTarget(m modes.Mode) bool {
	for _, t := range modes.EscalationTargets() {
		if t == m {
			return true
		}
	}
	return false
}

// targetList is `"workspace-write" or "danger-full-access"`.
func targetList() string {
	var names []string
	for _, t := range modes.EscalationTargets() {
		names = append(names, fmt.Sprintf("%q", t.String()))
	}
	return strings.Join(names, " or ")
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// nonEmptyString accepts a JSON string with a non-blank value.
func nonEmptyString(v json.RawMessage) (string, bool) {
	var s string
	if v == nil || json.Unmarshal(v, &s) != nil || strings.TrimSpace(s) == "" {
		return "", false
	}
	return s, true
}

// positiveNumber accepts a finite JSON number > 0.
func positiveNumber(v json.RawMessage) (float64, bool) {
	t := bytes.TrimSpace(v)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, false // a string holding digits is not a number
	}
	var n json.Number
	if json.Unmarshal(t, &n) != nil {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return 0, false
	}
	return f, true
}

// compact renders a JSON value as the model sent it, without whitespace.
func compact(v json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	return b.String()
}
