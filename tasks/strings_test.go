package tasks

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExactStrings asserts every exact string of contract section 5, byte
// for byte, as produced by the runtime and the tools.
func TestExactStrings(t *testing.T) {
	cases := []struct {
		name string
		got  func(t *testing.T, e *env) string
		want string
	}{
		{"unknown task", func(t *testing.T, e *env) string {
			return callTool(NewTaskOutput(e.r), session("a"), `{"task_id":"bash-9"}`).Text
		}, "Error: unknown task bash-9"},
		{"belongs to another session", func(t *testing.T, e *env) string {
			id := e.start("a", "build", newFake())
			return callTool(NewTaskOutput(e.r), session("b"), `{"task_id":"`+id+`"}`).Text
		}, "Error: task bash-1 belongs to another session"},
		{"invalid task_id empty", func(t *testing.T, e *env) string {
			return callTool(NewTaskKill(e.r), session("a"), `{"task_id":""}`).Text
		}, `Error: invalid task_id: expected a non-empty string, got ""`},
		{"limit reached", func(t *testing.T, e *env) string {
			for range 10 {
				e.start("a", "x", newFake())
			}
			_, err := e.r.Start("a", "bash", "y", func(string) (Handle, error) { return newFake(), nil })
			require.Error(t, err)
			return err.Error()
		}, "background task limit reached for this owner (limit: 10); use task_kill to stop an unneeded task, wait for it to finish, then retry"},
		{"invalid wait timeout", func(t *testing.T, e *env) string {
			id := e.start("a", "build", newFake())
			return callTool(NewTaskOutput(e.r), session("a"), `{"task_id":"`+id+`","wait":true,"timeout_ms":0}`).Text
		}, "Error: invalid wait timeout: expected a positive number of milliseconds, got 0"},
		{"wait aborted", func(t *testing.T, e *env) string {
			id := e.start("a", "build", newFake())
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := e.r.Output(ctx, session("a"), id, true, nil)
			require.Error(t, err)
			return err.Error()
		}, "wait aborted"},
		{"no new output", func(t *testing.T, e *env) string {
			id := e.start("a", "build", newFake())
			return callTool(NewTaskOutput(e.r), session("a"), `{"task_id":"`+id+`"}`).Text
		}, "(no new output)\n[status: running]"},
		{"output then status with detail", func(t *testing.T, e *env) string {
			h := newFake()
			id := e.start("a", "build", h)
			h.write("hello\nworld")
			h.finish(completed0)
			return callTool(NewTaskOutput(e.r), session("a"), `{"task_id":"`+id+`"}`).Text
		}, "hello\nworld\n[status: completed, exit code: 0]"},
		{"output ending in newline", func(t *testing.T, e *env) string {
			h := newFake()
			id := e.start("a", "build", h)
			h.write("line\n")
			return callTool(NewTaskOutput(e.r), session("a"), `{"task_id":"`+id+`"}`).Text
		}, "line\n[status: running]"},
		{"no background tasks", func(t *testing.T, e *env) string {
			return callTool(NewTaskList(e.r), session("a"), `{}`).Text
		}, "(no background tasks)"},
		{"list lines", func(t *testing.T, e *env) string {
			e.start("a", "build the project", newFake())
			h := newFake()
			e.start("a", "run tests", h)
			h.finish(completed2)
			e.settle("bash-2")
			return callTool(NewTaskList(e.r), session("a"), `{}`).Text
		}, "bash-1 [bash] running \u2014 build the project\nbash-2 [bash] completed \u2014 run tests"},
		{"requested cancellation", func(t *testing.T, e *env) string {
			id := e.start("a", "build", newFake())
			return callTool(NewTaskKill(e.r), session("a"), `{"task_id":"`+id+`"}`).Text
		}, "requested cancellation of task bash-1"},
		{"had already finished", func(t *testing.T, e *env) string {
			h := newFake()
			id := e.start("a", "build", h)
			h.finish(completed0)
			e.settle(id)
			return callTool(NewTaskKill(e.r), session("a"), `{"task_id":"`+id+`"}`).Text
		}, "task bash-1 had already finished [status: completed, exit code: 0]"},
		{"had already finished without detail", func(t *testing.T, e *env) string {
			h := newFake()
			id := e.start("a", "build", h)
			h.finish(Outcome{Status: StatusKilled})
			return callTool(NewBashKill(e.r), session("a"), `{"task_id":"`+id+`"}`).Text
		}, "task bash-1 had already finished [status: killed]"},
		{"completion notice", func(t *testing.T, e *env) string {
			h := newFake()
			id := e.start("a", "build the project", h)
			h.finish(completed0)
			e.settle(id)
			n := e.nr.all()
			require.Len(t, n, 1)
			return n[0]
		}, "a: background task bash-1 (bash: build the project) finished [status: completed, exit code: 0]. Read its output with task_output."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 0)
			assert.Equal(t, tc.want, tc.got(t, e))
		})
	}
}

func TestStatusLine(t *testing.T) {
	for _, tc := range []struct {
		status Status
		detail string
		want   string
	}{
		{StatusRunning, "", "[status: running]"},
		{StatusStopping, "", "[status: stopping]"},
		{StatusCompleted, "exit code: 0", "[status: completed, exit code: 0]"},
		{StatusKilled, "signal: SIGTERM", "[status: killed, signal: SIGTERM]"},
		{StatusKilled, "killed before exit", "[status: killed, killed before exit]"},
		{StatusFailed, "sandbox runner failed", "[status: failed, sandbox runner failed]"},
	} {
		assert.Equal(t, tc.want, StatusLine(tc.status, tc.detail))
	}
}

func TestJoinOutput(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"", "(no new output)\n[status: running]"},
		{"a", "a\n[status: running]"},
		{"a\n", "a\n[status: running]"},
		{"a\n\n", "a\n\n[status: running]"}, // a real blank line stays
		{"\n", "\n[status: running]"},
	} {
		assert.Equal(t, tc.want, joinOutput(tc.out, "[status: running]"), "%q", tc.out)
	}
}

func TestErrorKinds(t *testing.T) {
	e := newEnv(t, 1)
	_, err := e.r.Output(context.Background(), session("a"), "bash-1", false, nil)
	assert.True(t, errors.Is(err, ErrUnknownTask))
	id := e.start("a", "x", newFake())
	_, err = e.r.Kill(session("b"), id, "")
	assert.True(t, errors.Is(err, ErrForeignTask))
	_, err = e.r.Start("a", "bash", "y", func(string) (Handle, error) { return newFake(), nil })
	assert.True(t, errors.Is(err, ErrLimit))
	zero := 0.0
	_, err = e.r.Output(context.Background(), session("a"), id, true, &zero)
	assert.True(t, errors.Is(err, ErrInvalidWaitTimeout))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = e.r.Output(ctx, session("a"), id, true, nil)
	assert.True(t, errors.Is(err, ErrWaitAborted))
	assert.True(t, errors.Is(err, context.Canceled))
}
