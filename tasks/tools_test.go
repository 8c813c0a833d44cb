package tasks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/call"
)

func TestToolSchemas(t *testing.T) {
	r := New(Options{})
	want := map[string]struct {
		props    []string
		required []string
	}{
		ToolTaskOutput: {[]string{"task_id", "wait", "timeout_ms"}, []string{"task_id"}},
		ToolTaskList:   {nil, nil},
		ToolTaskKill:   {[]string{"task_id", "reason"}, []string{"task_id"}},
		ToolBashOutput: {[]string{"task_id"}, []string{"task_id"}},
		ToolBashKill:   {[]string{"task_id"}, []string{"task_id"}},
	}
	tools := Tools(r)
	require.Len(t, tools, 5)
	names := map[string]bool{}
	for _, tl := range tools {
		names[tl.Name()] = true
		w, ok := want[tl.Name()]
		require.True(t, ok, tl.Name())

		var s struct {
			Schema     string                     `json:"$schema"`
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
			Additional *bool                      `json:"additionalProperties"`
		}
		require.NoError(t, json.Unmarshal(tl.Schema(), &s), tl.Name())
		assert.Equal(t, "https://json-schema.org/draft/2020-12/schema", s.Schema)
		assert.Equal(t, "object", s.Type)
		var props []string
		for p := range s.Properties {
			props = append(props, p)
		}
		assert.ElementsMatch(t, w.props, props, tl.Name())
		assert.Equal(t, w.required, s.Required, tl.Name())
		require.NotNil(t, s.Additional)
		assert.False(t, *s.Additional)

		d := tl.Description()
		assert.NotEmpty(t, d, tl.Name())
	}
	assert.Len(t, names, 5)
	assert.Len(t, TaskTools(r), 3)

	// The descriptions teach consuming reads and polling.
	out := NewTaskOutput(r).Description()
	for _, s := range []string{"since your previous read", "(no new output)", "[status: <status>, <detail>]", "wait: true", "30000", "600000", "does not wake you up", "poll with task_output"} {
		assert.Contains(t, out, s)
	}
	assert.Contains(t, NewTaskList(r).Description(), "<id> [<kind>] <status> \u2014 <label>")
	assert.Contains(t, NewTaskKill(r).Description(), "already finished")
	assert.Contains(t, NewBashOutput(r).Description(), "since the previous bash_output")
	assert.Contains(t, NewBashKill(r).Description(), "unknown task ids are errors")
}

func TestToolArgumentErrors(t *testing.T) {
	e := newEnv(t, 0)
	e.start("a", "x", newFake())
	c := session("a")
	cases := []struct {
		tool call.Tool
		args string
		want string
	}{
		{NewTaskOutput(e.r), `{}`, `invalid task_id: expected a non-empty string, got null`},
		{NewTaskOutput(e.r), ``, `invalid task_id: expected a non-empty string, got null`},
		{NewTaskOutput(e.r), `null`, `invalid task_id: expected a non-empty string, got null`},
		{NewTaskOutput(e.r), `{"task_id":null}`, `invalid task_id: expected a non-empty string, got null`},
		{NewTaskOutput(e.r), `{"task_id":5}`, `invalid task_id: expected a non-empty string, got 5`},
		{NewTaskKill(e.r), `{"task_id":""}`, `invalid task_id: expected a non-empty string, got ""`},
		{NewTaskKill(e.r), `{"task_id":["bash-1"]}`, `invalid task_id: expected a non-empty string, got ["bash-1"]`},
		{NewBashOutput(e.r), `{"task_id":false}`, `invalid task_id: expected a non-empty string, got false`},
		{NewBashKill(e.r), `{"task_id": { "id" : 1 }}`, `invalid task_id: expected a non-empty string, got {"id":1}`},
		{NewTaskOutput(e.r), `[1]`, `invalid arguments: expected a JSON object, got [1]`},
		{NewTaskList(e.r), `"x"`, `invalid arguments: expected a JSON object, got "x"`},
		{NewTaskOutput(e.r), `{"task_id":"bash-1","wait":"yes"}`, `invalid wait: expected a boolean, got "yes"`},
		{NewTaskKill(e.r), `{"task_id":"bash-1","reason":7}`, `invalid reason: expected a string, got 7`},
		{NewTaskOutput(e.r), `{"task_id":"bash-2"}`, `unknown task bash-2`},
		{NewBashOutput(e.r), `{"task_id":"nope"}`, `unknown task nope`},
		{NewBashKill(e.r), `{"task_id":"bash-2"}`, `unknown task bash-2`},
	}
	for _, tc := range cases {
		res := tc.tool.Call(t.Context(), c, json.RawMessage(tc.args))
		assert.Equal(t, call.Result{Text: "Error: " + tc.want, IsError: true}, res, "%s %s", tc.tool.Name(), tc.args)
	}
}

func TestToolsIgnoreUnknownKeys(t *testing.T) {
	e := newEnv(t, 0)
	h := newFake()
	e.start("a", "x", h)
	h.write("hi")
	c := session("a")
	res := callTool(NewTaskOutput(e.r), c, `{"task_id":"bash-1","env":{"X":"1"},"block":true}`)
	assert.Equal(t, "hi\n[status: running]", res.Text)
	res = callTool(NewTaskList(e.r), c, `{"all":true}`)
	assert.Equal(t, "bash-1 [bash] running \u2014 x", res.Text)
	// bash_output has no wait: a wait key is ignored, and so is its timeout.
	res = callTool(NewBashOutput(e.r), c, `{"task_id":"bash-1","wait":true,"timeout_ms":-5}`)
	assert.Equal(t, "(no new output)\n[status: running]", res.Text)
	res = callTool(NewBashKill(e.r), c, `{"task_id":"bash-1","reason":5}`)
	assert.Equal(t, "requested cancellation of task bash-1", res.Text)
	in, _ := e.r.Get("bash-1")
	assert.Equal(t, "", in.KillReason)
}

func TestToolValues(t *testing.T) {
	e := newEnv(t, 0)
	h := newFake()
	e.start("a", "build", h)
	c := session("a")

	list := callTool(NewTaskList(e.r), c, `{}`)
	assert.Equal(t, ListResult{Tasks: []Info{{ID: "bash-1", Kind: "bash", Label: "build", Owner: "a", Status: StatusRunning}}}, list.Value)
	empty := callTool(NewTaskList(e.r), session("b"), `{}`)
	assert.Equal(t, ListResult{Tasks: []Info{}}, empty.Value)
	b, err := json.Marshal(empty.Value)
	require.NoError(t, err)
	assert.JSONEq(t, `{"tasks":[]}`, string(b))

	h.write("x")
	h.finish(completed0)
	out := callTool(NewTaskOutput(e.r), c, `{"task_id":"bash-1","wait":true,"timeout_ms":1000}`)
	b, err = json.Marshal(out.Value)
	require.NoError(t, err)
	assert.JSONEq(t, `{"taskId":"bash-1","status":"completed","detail":"exit code: 0","output":"x","waited":true}`, string(b))

	kill := callTool(NewTaskKill(e.r), c, `{"task_id":"bash-1","reason":"done"}`)
	b, err = json.Marshal(kill.Value)
	require.NoError(t, err)
	assert.JSONEq(t, `{"taskId":"bash-1","status":"completed","detail":"exit code: 0","alreadyFinished":true}`, string(b))
}

func TestBashAliases(t *testing.T) {
	// The older seed's tools over the same runtime: output since the
	// previous read plus a status line; kill = cancel; a finished task is
	// a reported no-op; unknown ids are errors; same ownership fence.
	e := newEnv(t, 0)
	h := newFake()
	e.start("a", "sleep then print", h)
	out, kill := NewBashOutput(e.r), NewBashKill(e.r)
	c := session("a")

	h.write("tick 1\n")
	assert.Equal(t, "tick 1\n[status: running]", callTool(out, c, `{"task_id":"bash-1"}`).Text)
	assert.Equal(t, "(no new output)\n[status: running]", callTool(out, c, `{"task_id":"bash-1"}`).Text)
	h.write("tick 2\n[some output was dropped from memory; full output: /tmp/a.out]")
	assert.Equal(t, "tick 2\n[some output was dropped from memory; full output: /tmp/a.out]\n[status: running]", callTool(out, c, `{"task_id":"bash-1"}`).Text)

	assert.Equal(t, "Error: task bash-1 belongs to another session", callTool(kill, session("b"), `{"task_id":"bash-1"}`).Text)
	assert.Equal(t, "requested cancellation of task bash-1", callTool(kill, c, `{"task_id":"bash-1"}`).Text)
	assert.Equal(t, "(no new output)\n[status: stopping]", callTool(out, c, `{"task_id":"bash-1"}`).Text)
	h.finish(Outcome{Status: StatusKilled, Detail: "signal: SIGTERM"})
	assert.Equal(t, "(no new output)\n[status: killed, signal: SIGTERM]", callTool(out, c, `{"task_id":"bash-1"}`).Text)
	res := callTool(kill, c, `{"task_id":"bash-1"}`)
	assert.False(t, res.IsError)
	assert.Equal(t, "task bash-1 had already finished [status: killed, signal: SIGTERM]", res.Text)

	h2 := newFake()
	e.start("a", "make", h2)
	h2.finish(completed2)
	assert.Equal(t, "(no new output)\n[status: completed, exit code: 2]", callTool(out, c, `{"task_id":"bash-2"}`).Text)
	assert.True(t, strings.HasPrefix(callTool(out, c, `{"task_id":"bash-3"}`).Text, "Error: unknown task bash-3"))
}
