package envreg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/call"
)

// newTest is a registry with a fixed home, independent of the environment.
func newTest(t *testing.T) *Registry {
	t.Helper()
	r, err := New(Options{Home: "/h"})
	require.NoError(t, err)
	return r
}

// fixed is a contributor declaring keys (with descriptions) and returning
// values.
// fixedRef is fixed's contributor by pointer.
func fixedRef(name string, values map[string]any, keys ...string) *Contributor {
	c := fixed(name, values, keys...)
	return &c
}

func fixed(name string, values map[string]any, keys ...string) Contributor {
	vars := make(map[string]Variable, len(keys))
	for _, k := range keys {
		vars[k] = Variable{Description: "the " + k}
	}
	return Contributor{Name: name, Variables: vars, Resolve: func(Execution) (map[string]any, error) {
		return values, nil
	}}
}

type stringKind string

// TestErrors asserts every error text of the registry byte for byte, and
// that a failed registration registers nothing.
func TestErrors(t *testing.T) {
	jsonValues := func(doc string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(doc), &m); err != nil {
			panic(err)
		}
		return m
	}
	s := "x"
	tests := []struct {
		name     string
		setup    []Contributor
		register *Contributor // nil: only collect
		want     string
	}{
		// Register.
		{name: "empty name", register: &Contributor{Name: ""},
			want: `bash env contributor name must be non-empty`},
		{name: "blank name", register: &Contributor{Name: " \t\n"},
			want: `bash env contributor name must be non-empty`},
		{name: "duplicate name", setup: []Contributor{fixed("a", nil, "DSH_A")},
			register: fixedRef("a", nil, "DSH_B"),
			want:     `bash env contributor "a" is already registered`},
		{name: "duplicate name, checked before keys", setup: []Contributor{fixed("a", nil, "DSH_A")},
			register: fixedRef("a", nil, "bad"),
			want:     `bash env contributor "a" is already registered`},
		{name: "quotes are literal, not escaped", setup: []Contributor{fixed(`a"b\é`, nil)},
			register: fixedRef(`a"b\é`, nil),
			want:     `bash env contributor "a"b\é" is already registered`},
		{name: "the registry's own name", register: fixedRef("bash-env", nil, "DSH_A"),
			want: `bash env contributor "bash-env" is already registered`},
		{name: "no resolve", register: &Contributor{Name: "a", Variables: map[string]Variable{"DSH_A": {"a"}}},
			want: `bash env contributor "a" has no resolve function`},
		{name: "invalid key: lower case", register: fixedRef("a", nil, "DSH_lower"),
			want: `bash env contributor "a" declared invalid key "DSH_lower"`},
		{name: "invalid key: prefix only", register: fixedRef("a", nil, "DSH_"),
			want: `bash env contributor "a" declared invalid key "DSH_"`},
		{name: "invalid key: digit first", register: fixedRef("a", nil, "DSH_1A"),
			want: `bash env contributor "a" declared invalid key "DSH_1A"`},
		{name: "invalid key: underscore first", register: fixedRef("a", nil, "DSH__A"),
			want: `bash env contributor "a" declared invalid key "DSH__A"`},
		{name: "invalid key: lower-case prefix", register: fixedRef("a", nil, "dsh_A"),
			want: `bash env contributor "a" declared invalid key "dsh_A"`},
		{name: "invalid key: no prefix", register: fixedRef("a", nil, "PATH"),
			want: `bash env contributor "a" declared invalid key "PATH"`},
		{name: "invalid key: dash", register: fixedRef("a", nil, "DSH_A-B"),
			want: `bash env contributor "a" declared invalid key "DSH_A-B"`},
		{name: "invalid key: non-ASCII, not escaped", register: fixedRef("a", nil, "DSH_É"),
			want: `bash env contributor "a" declared invalid key "DSH_É"`},
		{name: "invalid key: empty", register: fixedRef("a", nil, ""),
			want: `bash env contributor "a" declared invalid key ""`},
		{name: "reserved DSH_HOME", register: fixedRef("a", nil, "DSH_HOME"),
			want: `bash env contributor "a" cannot own reserved key "DSH_HOME"`},
		{name: "reserved DSH_SHELL", register: fixedRef("a", nil, "DSH_SHELL"),
			want: `bash env contributor "a" cannot own reserved key "DSH_SHELL"`},
		{name: "reserved DSH_SESSION_ID", register: fixedRef("a", nil, "DSH_SESSION_ID"),
			want: `bash env contributor "a" cannot own reserved key "DSH_SESSION_ID"`},
		{name: "empty description", register: &Contributor{Name: "a", Variables: map[string]Variable{"DSH_A": {}}, Resolve: fixed("", nil).Resolve},
			want: `bash env contributor "a" must describe "DSH_A"`},
		{name: "blank description", register: &Contributor{Name: "a", Variables: map[string]Variable{"DSH_A": {" \t"}}, Resolve: fixed("", nil).Resolve},
			want: `bash env contributor "a" must describe "DSH_A"`},
		{name: "owned key", setup: []Contributor{fixed("first", nil, "DSH_A")},
			register: fixedRef("second", nil, "DSH_A"),
			want:     `bash env key "DSH_A" is already owned by contributor "first"; contributor "second" cannot also own it`},
		{name: "keys checked in sorted order", setup: []Contributor{fixed("first", nil, "DSH_A")},
			register: fixedRef("second", nil, "DSH_Z", "DSH_A", "DSH_B"),
			want:     `bash env key "DSH_A" is already owned by contributor "first"; contributor "second" cannot also own it`},
		{name: "invalid before owned, by key order", setup: []Contributor{fixed("first", nil, "DSH_B")},
			register: fixedRef("second", nil, "DSH_B", "DSH_a"),
			want:     `bash env key "DSH_B" is already owned by contributor "first"; contributor "second" cannot also own it`},
		{name: "all checks of one key before the next", register: fixedRef("a", nil, "DSH_HOME", "DSH_A_lower"),
			want: `bash env contributor "a" declared invalid key "DSH_A_lower"`},

		// Collect.
		{name: "undeclared key", setup: []Contributor{fixed("a", map[string]any{"DSH_A": "1", "DSH_B": "2"}, "DSH_A")},
			want: `bash env contributor "a" returned undeclared key "DSH_B"`},
		{name: "undeclared built-in key", setup: []Contributor{fixed("a", map[string]any{"DSH_HOME": "/x"}, "DSH_A")},
			want: `bash env contributor "a" returned undeclared key "DSH_HOME"`},
		{name: "undeclared invalid key", setup: []Contributor{fixed("a", map[string]any{"PATH": "/x"}, "DSH_A")},
			want: `bash env contributor "a" returned undeclared key "PATH"`},
		{name: "undeclared before non-string", setup: []Contributor{fixed("a", map[string]any{"DSH_A": 1, "DSH_B": "2"}, "DSH_A")},
			want: `bash env contributor "a" returned a non-string value for "DSH_A"`},
		{name: "non-string: int", setup: []Contributor{fixed("a", map[string]any{"DSH_A": 1}, "DSH_A")},
			want: `bash env contributor "a" returned a non-string value for "DSH_A"`},
		{name: "non-string: bytes", setup: []Contributor{fixed("a", map[string]any{"DSH_A": []byte("x")}, "DSH_A")},
			want: `bash env contributor "a" returned a non-string value for "DSH_A"`},
		{name: "non-string: pointer to string", setup: []Contributor{fixed("a", map[string]any{"DSH_A": &s}, "DSH_A")},
			want: `bash env contributor "a" returned a non-string value for "DSH_A"`},
		{name: "non-string: JSON number", setup: []Contributor{fixed("a", jsonValues(`{"DSH_A": 42}`), "DSH_A")},
			want: `bash env contributor "a" returned a non-string value for "DSH_A"`},
		{name: "non-string: JSON bool", setup: []Contributor{fixed("a", jsonValues(`{"DSH_A": true}`), "DSH_A")},
			want: `bash env contributor "a" returned a non-string value for "DSH_A"`},
		{name: "non-string: JSON object", setup: []Contributor{fixed("a", jsonValues(`{"DSH_A": {}}`), "DSH_A")},
			want: `bash env contributor "a" returned a non-string value for "DSH_A"`},
		{name: "resolve error, wrapped with the name",
			setup: []Contributor{{Name: "a", Variables: map[string]Variable{"DSH_A": {"a"}}, Resolve: func(Execution) (map[string]any, error) {
				return nil, errors.New("boom")
			}}},
			want: `bash env contributor "a": boom`},
		{name: "a later contributor's error fails the collection",
			setup: []Contributor{
				fixed("a", map[string]any{"DSH_A": "ok"}, "DSH_A"),
				fixed("b", map[string]any{"DSH_X": "1"}, "DSH_B"),
			},
			want: `bash env contributor "b" returned undeclared key "DSH_X"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTest(t)
			for _, c := range tt.setup {
				_, err := r.Register(c)
				require.NoError(t, err)
			}
			if tt.register == nil {
				snap, err := r.Collect(context.Background(), Execution{})
				require.Error(t, err)
				assert.Equal(t, tt.want, err.Error())
				assert.Zero(t, snap.Len())
				return
			}
			before := r.Variables()
			dispose, err := r.Register(*tt.register)
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			assert.Nil(t, dispose)
			assert.Equal(t, before, r.Variables(), "a failed registration registers nothing")
		})
	}
}

func TestResolveErrorUnwraps(t *testing.T) {
	r := newTest(t)
	sentinel := errors.New("store offline")
	_, err := r.Register(Contributor{Name: "a", Variables: map[string]Variable{"DSH_A": {"a"}}, Resolve: func(Execution) (map[string]any, error) {
		return nil, fmt.Errorf("locate: %w", sentinel)
	}})
	require.NoError(t, err)
	_, err = r.Collect(context.Background(), Execution{})
	assert.ErrorIs(t, err, sentinel)
	assert.EqualError(t, err, `bash env contributor "a": locate: store offline`)
}

// TestRegisterAllOrNothing: the valid keys of a refused contributor stay
// free, and its name stays available.
func TestRegisterAllOrNothing(t *testing.T) {
	r := newTest(t)
	_, err := r.Register(fixed("first", nil, "DSH_B"))
	require.NoError(t, err)
	_, err = r.Register(fixed("second", nil, "DSH_A", "DSH_B", "DSH_C"))
	require.Error(t, err)

	_, err = r.Register(fixed("third", nil, "DSH_A", "DSH_C"))
	require.NoError(t, err, "DSH_A and DSH_C are free")
	_, err = r.Register(fixed("second", nil, "DSH_D"))
	require.NoError(t, err, "the name is free")
}

func TestValidKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"DSH_A", true},
		{"DSH_SESSION_JSONL", true},
		{"DSH_A1_B2_", true},
		{"DSH_HOME", true},
		{"DSH_", false},
		{"DSH", false},
		{"", false},
		{"DSH_a", false},
		{"DSH_Ab", false},
		{"DSH_1", false},
		{"DSH__", false},
		{"DSH_A B", false},
		{"DSH_A=B", false},
		{"DSH_A\x00", false},
		{"dsh_A", false},
		{"XDSH_A", false},
		{"DSH_Ä", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ValidKey(tt.key), "%q", tt.key)
	}
}

func TestReserved(t *testing.T) {
	for _, k := range []string{"DSH_HOME", "DSH_SHELL", "DSH_SESSION_ID"} {
		assert.True(t, Reserved(k), k)
	}
	for _, k := range []string{"DSH_SESSION_JSONL", "DSH_A", "HOME", "dsh_home"} {
		assert.False(t, Reserved(k), k)
	}
}

func TestCollectBuiltins(t *testing.T) {
	tests := []struct {
		name string
		exec Execution
		want []string
	}{
		{"no agent", Execution{},
			[]string{"DSH_HOME=/h", "DSH_SHELL=1"}},
		{"no agent, background", Execution{Background: true, CallID: "c1"},
			[]string{"DSH_HOME=/h", "DSH_SHELL=1"}},
		{"agent", Execution{Agent: &call.Agent{Session: "s-1", Workspace: "/w"}},
			[]string{"DSH_HOME=/h", "DSH_SESSION_ID=s-1", "DSH_SHELL=1"}},
		{"agent, background", Execution{Agent: &call.Agent{Session: "s-2"}, Background: true},
			[]string{"DSH_HOME=/h", "DSH_SESSION_ID=s-2", "DSH_SHELL=1"}},
		{"agent without a session", Execution{Agent: &call.Agent{Workspace: "/w"}},
			[]string{"DSH_HOME=/h", "DSH_SHELL=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := newTest(t).Collect(context.Background(), tt.exec)
			require.NoError(t, err)
			assert.Equal(t, tt.want, snap.Sorted())
		})
	}
}

// TestCollectOrder: contributors resolve in name order whatever the
// registration order, and the snapshot is sorted by key whatever the
// contributor order.
func TestCollectOrder(t *testing.T) {
	r := newTest(t)
	var order []string
	var seen []Execution
	add := func(name, key, value string) {
		_, err := r.Register(Contributor{
			Name:      name,
			Variables: map[string]Variable{key: {"v"}},
			Resolve: func(e Execution) (map[string]any, error) {
				order = append(order, name)
				seen = append(seen, e)
				return map[string]any{key: value}, nil
			},
		})
		require.NoError(t, err)
	}
	add("m", "DSH_A", "from m")
	add("b", "DSH_Z", "from b")
	add("z", "DSH_M", "from z")
	add("B", "DSH_B", "from B") // byte order: upper case first
	add("a", "DSH_Y", "from a")

	exec := Execution{Agent: &call.Agent{Session: "s"}, CallID: "call-7", Background: true}
	snap, err := r.Collect(context.Background(), exec)
	require.NoError(t, err)
	assert.Equal(t, []string{"B", "a", "b", "m", "z"}, order)
	for _, e := range seen {
		assert.Equal(t, exec, e, "every resolver gets the execution")
	}
	assert.Equal(t, []string{
		"DSH_A=from m", "DSH_B=from B", "DSH_HOME=/h", "DSH_M=from z", "DSH_SESSION_ID=s", "DSH_SHELL=1", "DSH_Y=from a", "DSH_Z=from b",
	}, snap.Sorted())
	assert.Equal(t, []string{"DSH_A", "DSH_B", "DSH_HOME", "DSH_M", "DSH_SESSION_ID", "DSH_SHELL", "DSH_Y", "DSH_Z"}, snap.Keys())
}

func TestCollectValues(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		want   []string
	}{
		{"nil map", nil, []string{"DSH_HOME=/h", "DSH_SHELL=1"}},
		{"empty map", map[string]any{}, []string{"DSH_HOME=/h", "DSH_SHELL=1"}},
		{"nil value is not set", map[string]any{"DSH_A": nil, "DSH_B": "b"}, []string{"DSH_B=b", "DSH_HOME=/h", "DSH_SHELL=1"}},
		{"empty string is set", map[string]any{"DSH_A": ""}, []string{"DSH_A=", "DSH_HOME=/h", "DSH_SHELL=1"}},
		{"string kind", map[string]any{"DSH_A": stringKind("k")}, []string{"DSH_A=k", "DSH_HOME=/h", "DSH_SHELL=1"}},
		{"value with = and newline", map[string]any{"DSH_A": "x=y\nz"}, []string{"DSH_A=x=y\nz", "DSH_HOME=/h", "DSH_SHELL=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTest(t)
			_, err := r.Register(fixed("c", tt.values, "DSH_A", "DSH_B"))
			require.NoError(t, err)
			snap, err := r.Collect(context.Background(), Execution{})
			require.NoError(t, err)
			assert.Equal(t, tt.want, snap.Sorted())
		})
	}
}

func TestCollectContext(t *testing.T) {
	r := newTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := map[string]bool{}
	for _, name := range []string{"a", "b"} {
		_, err := r.Register(Contributor{Name: name, Variables: map[string]Variable{}, Resolve: func(Execution) (map[string]any, error) {
			ran[name] = true
			cancel()
			return nil, nil
		}})
		require.NoError(t, err)
	}
	_, err := r.Collect(ctx, Execution{})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, map[string]bool{"a": true}, ran, "no contributor runs after the cancellation")

	_, err = r.Collect(ctx, Execution{})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, map[string]bool{"a": true}, ran, "nothing runs on a done context")
}

func TestDisposer(t *testing.T) {
	r := newTest(t)
	keys := func() []string {
		snap, err := r.Collect(context.Background(), Execution{})
		require.NoError(t, err)
		return snap.Keys()
	}
	disposeA, err := r.Register(fixed("a", map[string]any{"DSH_A": "1"}, "DSH_A"))
	require.NoError(t, err)
	disposeB, err := r.Register(fixed("b", map[string]any{"DSH_B": "1"}, "DSH_B"))
	require.NoError(t, err)
	assert.Equal(t, []string{"DSH_A", "DSH_B", "DSH_HOME", "DSH_SHELL"}, keys())

	disposeA()
	assert.Equal(t, []string{"DSH_B", "DSH_HOME", "DSH_SHELL"}, keys(), "only a is removed")
	disposeA()
	assert.Equal(t, []string{"DSH_B", "DSH_HOME", "DSH_SHELL"}, keys(), "idempotent")

	// The name and the key are free again.
	_, err = r.Register(fixed("other", nil, "DSH_A"))
	require.NoError(t, err, "DSH_A is released")
	disposeA2, err := r.Register(fixed("a", map[string]any{"DSH_A2": "2"}, "DSH_A2"))
	require.NoError(t, err, "the name a is released")

	disposeA()
	assert.Equal(t, []string{"DSH_A2", "DSH_B", "DSH_HOME", "DSH_SHELL"}, keys(), "an old disposer does not remove a new registration")
	owners := map[string]string{}
	for _, v := range r.Variables() {
		owners[v.Key] = v.Owner
	}
	assert.Equal(t, "other", owners["DSH_A"], "an old disposer does not release a key owned by another contributor")

	disposeA2()
	disposeB()
	assert.Equal(t, []string{"DSH_HOME", "DSH_SHELL"}, keys())
}

// TestNotAliased: nothing the caller holds is shared with the registry.
func TestNotAliased(t *testing.T) {
	r := newTest(t)
	returned := map[string]any{"DSH_A": "a"}
	vars := map[string]Variable{"DSH_A": {"a"}}
	_, err := r.Register(Contributor{Name: "c", Variables: vars, Resolve: func(Execution) (map[string]any, error) {
		return returned, nil
	}})
	require.NoError(t, err)
	vars["DSH_B"] = Variable{"b"} // not declared by this
	vars["DSH_A"] = Variable{"changed"}

	first, err := r.Collect(context.Background(), Execution{})
	require.NoError(t, err)
	m := first.Map()
	m["DSH_HOME"] = "/evil"
	m["DSH_X"] = "x"
	delete(m, "DSH_SHELL")
	first.Sorted()[0] = "DSH_A=evil"
	first.Keys()[0] = "DSH_EVIL"
	returned["DSH_A"] = "changed after collect"

	want := []string{"DSH_A=a", "DSH_HOME=/h", "DSH_SHELL=1"}
	assert.Equal(t, want, first.Sorted(), "the snapshot is frozen")
	v, ok := first.Get("DSH_A")
	assert.True(t, ok)
	assert.Equal(t, "a", v)

	returned["DSH_A"] = "a"
	second, err := r.Collect(context.Background(), Execution{})
	require.NoError(t, err)
	assert.Equal(t, want, second.Sorted(), "the next collection is unaffected")

	assert.Equal(t, []VariableInfo{
		{Key: "DSH_A", Owner: "c", Description: "a"},
		builtins[0], builtins[1], builtins[2],
	}, r.Variables(), "the declaration was copied")
	r.Variables()[0].Owner = "evil"
	assert.Equal(t, "c", r.Variables()[0].Owner)
}

func TestSnapshot(t *testing.T) {
	var zero Snapshot
	assert.Zero(t, zero.Len())
	assert.Empty(t, zero.Map())
	assert.NotNil(t, zero.Map())
	assert.Empty(t, zero.Sorted())
	_, ok := zero.Get("DSH_HOME")
	assert.False(t, ok)

	s := newSnapshot(map[string]string{"DSH_B": "2", "DSH_A": "1", "DSH_C": "3"})
	assert.Equal(t, 3, s.Len())
	assert.Equal(t, map[string]string{"DSH_A": "1", "DSH_B": "2", "DSH_C": "3"}, s.Map())
	for _, k := range []string{"DSH_A", "DSH_B", "DSH_C"} {
		v, ok := s.Get(k)
		assert.True(t, ok)
		assert.Equal(t, string(rune('1'+k[4]-'A')), v)
	}
	_, ok = s.Get("DSH_D")
	assert.False(t, ok)
	var all []string
	for k, v := range s.All() {
		all = append(all, k+"="+v)
		if k == "DSH_B" {
			break
		}
	}
	assert.Equal(t, []string{"DSH_A=1", "DSH_B=2"}, all)
}

func TestSessionPersistence(t *testing.T) {
	tests := []struct {
		name    string
		exec    Execution
		path    string
		ok      bool
		want    string // "" = not set
		located bool
	}{
		{"jsonl store", Execution{Agent: &call.Agent{Session: "s"}}, "/h/sessions/s.jsonl", true, "/h/sessions/s.jsonl", true},
		{"other store", Execution{Agent: &call.Agent{Session: "s"}}, "", false, "", true},
		{"ok without a path", Execution{Agent: &call.Agent{Session: "s"}}, "", true, "", true},
		{"not ok with a path", Execution{Agent: &call.Agent{Session: "s"}}, "/p", false, "", true},
		{"no agent", Execution{}, "/p", true, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTest(t)
			located := false
			c := SessionPersistence(func(e Execution) (string, bool) {
				located = true
				assert.Equal(t, tt.exec, e)
				return tt.path, tt.ok
			})
			assert.Equal(t, "session-persistence", c.Name)
			_, err := r.Register(c)
			require.NoError(t, err)
			snap, err := r.Collect(context.Background(), tt.exec)
			require.NoError(t, err)
			got, set := snap.Get("DSH_SESSION_JSONL")
			assert.Equal(t, tt.want != "", set)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.located, located)
		})
	}

	r := newTest(t)
	_, err := r.Register(SessionPersistence(nil))
	assert.EqualError(t, err, `bash env contributor "session-persistence" has no resolve function`)
}

func TestVariablesAndDescribe(t *testing.T) {
	r := newTest(t)
	_, err := r.Register(SessionPersistence(func(Execution) (string, bool) { return "", false }))
	require.NoError(t, err)
	_, err = r.Register(Contributor{Name: "git", Variables: map[string]Variable{
		"DSH_PATH_DIALECT": {"Path spelling of the shell: posix or windows."},
		"DSH_A":            {"First."},
	}, Resolve: fixed("", nil).Resolve})
	require.NoError(t, err)

	vars := r.Variables()
	assert.True(t, slices.IsSortedFunc(vars, func(a, b VariableInfo) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	}))
	assert.Equal(t, []string{"DSH_A", "DSH_HOME", "DSH_PATH_DIALECT", "DSH_SESSION_ID", "DSH_SESSION_JSONL", "DSH_SHELL"},
		func() (keys []string) {
			for _, v := range vars {
				keys = append(keys, v.Key)
			}
			return keys
		}())
	for _, v := range vars {
		assert.Equal(t, Reserved(v.Key), v.Builtin, v.Key)
		assert.Equal(t, v.Builtin, v.Owner == "bash-env", v.Key)
		assert.NotEmpty(t, v.Description, v.Key)
	}
	assert.Contains(t, vars[4].Description, "not a credential")
	assert.Equal(t, "session-persistence", vars[4].Owner)

	assert.Equal(t, ""+
		"DSH_A (git): First.\n"+
		"DSH_HOME (bash-env): Absolute path of the harness home directory (configuration and data).\n"+
		"DSH_PATH_DIALECT (git): Path spelling of the shell: posix or windows.\n"+
		"DSH_SESSION_ID (bash-env): Id of the calling agent's session; unset for a call without an agent.\n"+
		"DSH_SESSION_JSONL (session-persistence): Path of the current session's JSONL transcript (a location hint, not a credential); set only when the session is persisted in a jsonl store.\n"+
		"DSH_SHELL (bash-env): Always 1: the command runs under the bash tool.\n",
		r.Describe())
}

// TestResolveUsesRegistry: resolvers run without a registry lock.
func TestResolveUsesRegistry(t *testing.T) {
	r := newTest(t)
	var dispose func()
	_, err := r.Register(Contributor{Name: "a", Variables: map[string]Variable{"DSH_A": {"a"}}, Resolve: func(e Execution) (map[string]any, error) {
		n := len(r.Variables())
		if dispose == nil {
			var err error
			dispose, err = r.Register(fixed("late", map[string]any{"DSH_LATE": "1"}, "DSH_LATE"))
			if err != nil {
				return nil, err
			}
		}
		return map[string]any{"DSH_A": fmt.Sprint(n)}, nil
	}})
	require.NoError(t, err)

	snap, err := r.Collect(context.Background(), Execution{})
	require.NoError(t, err)
	assert.Equal(t, []string{"DSH_A=4", "DSH_HOME=/h", "DSH_SHELL=1"}, snap.Sorted(), "a registration made during a collection joins the next one")
	snap, err = r.Collect(context.Background(), Execution{})
	require.NoError(t, err)
	assert.Equal(t, []string{"DSH_A=5", "DSH_HOME=/h", "DSH_LATE=1", "DSH_SHELL=1"}, snap.Sorted())
	dispose()
}

// TestConcurrent registers, disposes, lists and collects from many
// goroutines; run it with -race.
func TestConcurrent(t *testing.T) {
	r := newTest(t)
	_, err := r.Register(fixed("stable", map[string]any{"DSH_STABLE": "1"}, "DSH_STABLE"))
	require.NoError(t, err)

	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, 4*workers*rounds)
	for w := range workers {
		wg.Go(func() {
			name := fmt.Sprintf("c%d", w)
			key := fmt.Sprintf("DSH_C%d", w)
			for range rounds {
				dispose, err := r.Register(fixed(name, map[string]any{key: name}, key))
				if err != nil {
					errs <- err
					continue
				}
				// A competing registration of the same key always fails.
				if _, err := r.Register(fixed(name+"-rival", nil, key)); err == nil {
					errs <- fmt.Errorf("%s: a second owner was accepted", key)
				}
				dispose()
				dispose()
			}
		})
		wg.Go(func() {
			for i := range rounds {
				exec := Execution{}
				if i%2 == 0 {
					exec.Agent = &call.Agent{Session: fmt.Sprint("s", w)}
				}
				snap, err := r.Collect(context.Background(), exec)
				if err != nil {
					errs <- err
					continue
				}
				m := snap.Map()
				if m["DSH_STABLE"] != "1" || m["DSH_HOME"] != "/h" || m["DSH_SHELL"] != "1" {
					errs <- fmt.Errorf("snapshot %v", snap.Sorted())
				}
				if _, ok := m["DSH_SESSION_ID"]; ok != (exec.Agent != nil) {
					errs <- fmt.Errorf("snapshot %v for agent %v", snap.Sorted(), exec.Agent)
				}
				if !slices.IsSorted(snap.Keys()) {
					errs <- fmt.Errorf("unsorted %v", snap.Keys())
				}
				m["DSH_STABLE"] = "mutated"
				_ = r.Variables()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	snap, err := r.Collect(context.Background(), Execution{})
	require.NoError(t, err)
	assert.Equal(t, []string{"DSH_HOME=/h", "DSH_SHELL=1", "DSH_STABLE=1"}, snap.Sorted())
	assert.Len(t, r.Variables(), 4)
}

// TestNoEnvironmentWrites: neither New nor Collect writes the process
// environment.
func TestNoEnvironmentWrites(t *testing.T) {
	before := os.Environ()
	r, err := New(Options{})
	require.NoError(t, err)
	_, err = r.Register(SessionPersistence(func(Execution) (string, bool) { return "/x.jsonl", true }))
	require.NoError(t, err)
	_, err = r.Collect(context.Background(), Execution{Agent: &call.Agent{Session: "s"}})
	require.NoError(t, err)
	assert.Equal(t, before, os.Environ())
}
