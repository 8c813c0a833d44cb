package envreg

import (
	"iter"
	"slices"
	"strings"
)

// Snapshot is a collected managed environment: immutable, sorted by key
// (byte order), sharing nothing with the registry. The zero Snapshot is
// empty. Every method that returns a map or a slice returns a new one.
type Snapshot struct {
	vars []kv // sorted by key
}

type kv struct{ key, value string }

func newSnapshot(m map[string]string) Snapshot {
	vars := make([]kv, 0, len(m))
	for k, v := range m {
		vars = append(vars, kv{k, v})
	}
	slices.SortFunc(vars, func(a, b kv) int { return strings.Compare(a.key, b.key) })
	return Snapshot{vars: vars}
}

// Len is the number of variables.
func (s Snapshot) Len() int { return len(s.vars) }

// Get returns the value of key and whether it is set.
func (s Snapshot) Get(key string) (string, bool) {
	i, ok := slices.BinarySearchFunc(s.vars, key, func(x kv, key string) int { return strings.Compare(x.key, key) })
	if !ok {
		return "", false
	}
	return s.vars[i].value, true
}

// Keys returns the names, sorted.
func (s Snapshot) Keys() []string {
	out := make([]string, len(s.vars))
	for i, v := range s.vars {
		out[i] = v.key
	}
	return out
}

// Map returns a new map of the variables: what the executor takes as
// Request.DshEnv.
func (s Snapshot) Map() map[string]string {
	out := make(map[string]string, len(s.vars))
	for _, v := range s.vars {
		out[v.key] = v.value
	}
	return out
}

// Sorted returns the variables as "KEY=VALUE" entries, sorted by key.
func (s Snapshot) Sorted() []string {
	out := make([]string, len(s.vars))
	for i, v := range s.vars {
		out[i] = v.key + "=" + v.value
	}
	return out
}

// All yields the variables in key order.
func (s Snapshot) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, v := range s.vars {
			if !yield(v.key, v.value) {
				return
			}
		}
	}
}
