package envreg

import (
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/call"
)

// Managed keys and names.
const (
	// Prefix starts every managed key.
	Prefix = "DSH_"

	// KeyHome is the built-in harness home (absolute).
	KeyHome = "DSH_HOME"
	// KeyShell is the built-in marker of a command run by the bash tool;
	// its value is always "1".
	KeyShell = "DSH_SHELL"
	// KeySessionID is the built-in session of the calling agent, set only
	// when the call has one.
	KeySessionID = "DSH_SESSION_ID"
	// KeySessionJSONL is the session transcript location contributed by
	// [SessionPersistence].
	KeySessionJSONL = "DSH_SESSION_JSONL"

	// BuiltinOwner is the owner of the built-in keys in [Registry.Variables]:
	// the registry itself. No contributor can take this name.
	BuiltinOwner = "bash-env"
	// SessionPersistenceName is the name of the [SessionPersistence]
	// contributor.
	SessionPersistenceName = "session-persistence"
)

// Variable describes one managed key a contributor declares.
type Variable struct {
	// Description says what the variable holds; it must not be blank.
	Description string
}

// Execution is the bash call a snapshot is collected for.
type Execution struct {
	// Agent is the calling agent, or nil for a call made outside an agent
	// loop (no session).
	Agent *call.Agent
	// CallID is the tool call's id, "" when unknown.
	CallID string
	// Background reports a run_in_background call.
	Background bool
}

// session is the session of the calling agent, "" without one.
func (e Execution) session() string {
	if e.Agent == nil {
		return ""
	}
	return e.Agent.Session
}

// Contributor adds managed variables to every collected snapshot.
type Contributor struct {
	// Name identifies the contributor in errors and in
	// [Registry.Variables]; it must be non-blank and unique. Contributors
	// resolve in name order.
	Name string
	// Variables declares every key Resolve may return, with its
	// description. Each key must be DSH_ followed by [A-Z][A-Z0-9_]*, must
	// not be a built-in key and must not be owned by another contributor.
	// The registry keeps a copy: later changes to the map are not seen.
	Variables map[string]Variable
	// Resolve returns the values for one execution: only declared keys,
	// each with a string value (any type whose kind is string). A key that
	// is absent or has a nil value is not set. An error fails the whole
	// collection. Resolve must be safe for concurrent use; it runs without
	// any registry lock held, so it may itself use the registry.
	Resolve func(Execution) (map[string]any, error)
}

// SessionPersistence is the upstream "session-persistence" contributor: it
// owns DSH_SESSION_JSONL, the location of the calling session's JSONL
// transcript — a location hint, not a credential. locate is asked only for
// calls with an agent; the variable is set only when it reports ok with a
// non-empty path, that is only when the session is persisted in a jsonl
// store. locate should return an absolute path. A nil locate makes a
// contributor that [Registry.Register] refuses.
func SessionPersistence(locate func(Execution) (path string, ok bool)) Contributor {
	c := Contributor{
		Name: SessionPersistenceName,
		Variables: map[string]Variable{
			KeySessionJSONL: {Description: "Path of the current session's JSONL transcript (a location hint, not a credential); set only when the session is persisted in a jsonl store."},
		},
	}
	if locate != nil {
		c.Resolve = func(e Execution) (map[string]any, error) {
			if e.Agent == nil {
				return nil, nil
			}
			path, ok := locate(e)
			if !ok || path == "" {
				return nil, nil
			}
			return map[string]any{KeySessionJSONL: path}, nil
		}
	}
	return c
}

// ValidKey reports whether key has the shape of a managed key: DSH_
// followed by an upper-case ASCII letter, then upper-case letters, digits
// and underscores. Built-in keys are valid keys (but reserved).
func ValidKey(key string) bool {
	rest, ok := strings.CutPrefix(key, Prefix)
	if !ok || rest == "" || rest[0] < 'A' || rest[0] > 'Z' {
		return false
	}
	for i := 1; i < len(rest); i++ {
		c := rest[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
