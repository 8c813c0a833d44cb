package envreg

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// builtins are the keys the registry owns itself, with their descriptions.
var builtins = [...]VariableInfo{
	{Key: KeyHome, Owner: BuiltinOwner, Builtin: true,
		Description: "Absolute path of the harness home directory (configuration and data)."},
	{Key: KeySessionID, Owner: BuiltinOwner, Builtin: true,
		Description: "Id of the calling agent's session; unset for a call without an agent."},
	{Key: KeyShell, Owner: BuiltinOwner, Builtin: true,
		Description: "Always 1: the command runs under the bash tool."},
}

// Reserved reports whether key is a built-in key, owned by the registry.
func Reserved(key string) bool {
	for _, b := range builtins {
		if b.Key == key {
			return true
		}
	}
	return false
}

// Registry collects the managed DSH_* environment of bash calls. Create it
// with [New]; it is safe for concurrent use.
type Registry struct {
	home string

	mu     sync.RWMutex
	byName map[string]*entry // contributor name -> registration
	owners map[string]*entry // key -> owning registration
	sorted []*entry          // by name; replaced, never modified in place
}

// entry is one registration.
type entry struct {
	name    string
	keys    []string          // declared keys, sorted
	vars    map[string]string // key -> description
	resolve func(Execution) (map[string]any, error)
}

// New creates a registry with no contributors. DSH_HOME is resolved once,
// here (see [Options]); the error reports a home that cannot be resolved.
func New(o Options) (*Registry, error) {
	home, err := resolveHome(o)
	if err != nil {
		return nil, err
	}
	return &Registry{
		home:   home,
		byName: make(map[string]*entry),
		owners: make(map[string]*entry),
	}, nil
}

// Home is the registry's DSH_HOME: absolute and clean.
func (r *Registry) Home() string { return r.home }

// Register adds c. It is all or nothing: on error nothing is registered and
// dispose is nil. The checks, in this order (keys in sorted order): the
// name is non-blank; it is not registered yet (the registry's own name,
// [BuiltinOwner], counts as registered); Resolve is set; then for each
// declared key: it is valid ([ValidKey]), not reserved ([Reserved]),
// described, and not owned by another contributor.
//
// dispose removes exactly this registration and releases its keys; it is
// idempotent, safe for concurrent use, and does not touch a later
// registration under the same name. A collection already running may still
// use the removed contributor.
func (r *Registry) Register(c Contributor) (dispose func(), err error) {
	if strings.TrimSpace(c.Name) == "" {
		return nil, errors.New("bash env contributor name must be non-empty")
	}
	e := &entry{
		name:    c.Name,
		keys:    make([]string, 0, len(c.Variables)),
		vars:    make(map[string]string, len(c.Variables)),
		resolve: c.Resolve,
	}
	for k, v := range c.Variables {
		e.keys = append(e.keys, k)
		e.vars[k] = v.Description
	}
	slices.Sort(e.keys)

	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.byName[c.Name]; dup || c.Name == BuiltinOwner {
		return nil, fmt.Errorf(`bash env contributor "%s" is already registered`, c.Name)
	}
	if c.Resolve == nil {
		return nil, fmt.Errorf(`bash env contributor "%s" has no resolve function`, c.Name)
	}
	for _, k := range e.keys {
		switch {
		case !ValidKey(k):
			return nil, fmt.Errorf(`bash env contributor "%s" declared invalid key "%s"`, c.Name, k)
		case Reserved(k):
			return nil, fmt.Errorf(`bash env contributor "%s" cannot own reserved key "%s"`, c.Name, k)
		case strings.TrimSpace(e.vars[k]) == "":
			return nil, fmt.Errorf(`bash env contributor "%s" must describe "%s"`, c.Name, k)
		}
		if o, owned := r.owners[k]; owned {
			return nil, fmt.Errorf(`bash env key "%s" is already owned by contributor "%s"; contributor "%s" cannot also own it`, k, o.name, c.Name)
		}
	}

	r.byName[e.name] = e
	for _, k := range e.keys {
		r.owners[k] = e
	}
	i, _ := slices.BinarySearchFunc(r.sorted, e.name, func(x *entry, name string) int {
		return strings.Compare(x.name, name)
	})
	r.sorted = slices.Insert(slices.Clip(r.sorted), i, e)
	return func() { r.remove(e) }, nil
}

// remove unregisters e if it is still registered.
func (r *Registry) remove(e *entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byName[e.name] != e {
		return
	}
	delete(r.byName, e.name)
	for _, k := range e.keys {
		if r.owners[k] == e {
			delete(r.owners, k)
		}
	}
	r.sorted = slices.DeleteFunc(slices.Clone(r.sorted), func(x *entry) bool { return x == e })
}

// Collect builds the managed environment of one bash call: DSH_HOME,
// DSH_SHELL=1, DSH_SESSION_ID when the call has an agent with a session,
// then every contributor's values, contributors in name order (byte order).
// Resolvers run without a registry lock, on the contributors registered
// when Collect starts. It fails, with no snapshot, when ctx is done, when a
// Resolve fails (its error wrapped with the contributor's name) or when a
// contributor returns an undeclared key or a non-string value.
func (r *Registry) Collect(ctx context.Context, e Execution) (Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return Snapshot{}, err
	}
	r.mu.RLock()
	contributors := r.sorted
	r.mu.RUnlock()

	values := make(map[string]string, len(builtins)+len(contributors))
	values[KeyHome] = r.home
	values[KeyShell] = "1"
	if s := e.session(); s != "" {
		values[KeySessionID] = s
	}
	for _, c := range contributors {
		if err := ctx.Err(); err != nil {
			return Snapshot{}, err
		}
		got, err := c.resolve(e)
		if err != nil {
			return Snapshot{}, fmt.Errorf(`bash env contributor "%s": %w`, c.name, err)
		}
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if _, declared := c.vars[k]; !declared {
				return Snapshot{}, fmt.Errorf(`bash env contributor "%s" returned undeclared key "%s"`, c.name, k)
			}
			v, set, ok := stringValue(got[k])
			if !ok {
				return Snapshot{}, fmt.Errorf(`bash env contributor "%s" returned a non-string value for "%s"`, c.name, k)
			}
			if set {
				values[k] = v
			}
		}
	}
	return newSnapshot(values), nil
}

// stringValue converts a resolved value: a string (or a value of a string
// kind) is set, nil is not set, anything else is not a string.
func stringValue(v any) (s string, set, ok bool) {
	switch v := v.(type) {
	case nil:
		return "", false, true
	case string:
		return v, true, true
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.String {
		return rv.String(), true, true
	}
	return "", false, false
}

// VariableInfo is one managed key in [Registry.Variables].
type VariableInfo struct {
	// Key is the variable's name, e.g. "DSH_HOME".
	Key string
	// Owner is the owning contributor's name, [BuiltinOwner] for a
	// built-in key.
	Owner string
	// Description is the owner's description of the variable.
	Description string
	// Builtin reports a key the registry owns itself.
	Builtin bool
}

// Variables lists every managed key, built-ins included, sorted by key,
// without running any resolver. The slice is the caller's.
func (r *Registry) Variables() []VariableInfo {
	r.mu.RLock()
	out := make([]VariableInfo, 0, len(builtins)+len(r.owners))
	out = append(out, builtins[:]...)
	for k, e := range r.owners {
		out = append(out, VariableInfo{Key: k, Owner: e.name, Description: e.vars[k]})
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b VariableInfo) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Describe renders [Registry.Variables] as text, one line per key:
// "<KEY> (<owner>): <description>\n".
func (r *Registry) Describe() string {
	var b strings.Builder
	for _, v := range r.Variables() {
		fmt.Fprintf(&b, "%s (%s): %s\n", v.Key, v.Owner, v.Description)
	}
	return b.String()
}
