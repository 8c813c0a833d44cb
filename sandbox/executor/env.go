package executor

import (
	"sort"
	"strings"
)

// ChildDefaults are set in every command's environment, after scrubbing
// and before the caller's variables.
var childDefaults = [...][2]string{
	{"NO_COLOR", "1"},
	{"TERM", "dumb"},
	{"PAGER", "cat"},
	{"GIT_PAGER", "cat"},
}

// Scrubbed reports whether a variable of the parent's environment is kept
// from commands: its name looks like a credential (contains KEY, PASSWORD,
// SECRET or TOKEN, in any case) or is a managed DSH_* name.
func Scrubbed(name string) bool {
	u := strings.ToUpper(name) // the ASCII words of /KEY|PASSWORD|SECRET|TOKEN/i
	return strings.Contains(u, "KEY") || strings.Contains(u, "PASSWORD") || strings.Contains(u, "SECRET") ||
		strings.Contains(u, "TOKEN") || strings.HasPrefix(u, "DSH_")
}

// ChildEnv builds a command's environment: parent (KEY=VALUE entries)
// scrubbed, then NO_COLOR=1 TERM=dumb PAGER=cat GIT_PAGER=cat, then env (the
// trusted caller's variables), then managed (the DSH_* snapshot). A later
// layer overrides an earlier one. The result is sorted by name. Nothing is
// read from or written to the process environment.
func ChildEnv(parent []string, env, managed map[string]string) []string {
	m := make(map[string]string, len(parent)+len(childDefaults)+len(env)+len(managed))
	for _, kv := range parent {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" || Scrubbed(name) {
			continue
		}
		m[name] = value
	}
	for _, kv := range childDefaults {
		m[kv[0]] = kv[1]
	}
	for k, v := range env {
		m[k] = v
	}
	for k, v := range managed {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// lookupEnv returns the value of name in a KEY=VALUE list (the last one).
func lookupEnv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}
