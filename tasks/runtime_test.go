package tasks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

func TestIDsPerKind(t *testing.T) {
	e := newEnv(t, 0)
	var seen []string
	for _, kind := range []string{"bash", "bash", "agent", "bash", "agent"} {
		var given string
		id, err := e.r.Start("a", kind, "x", func(id string) (Handle, error) { given = id; return newFake(), nil })
		require.NoError(t, err)
		assert.Equal(t, given, id, "spawn receives the id")
		seen = append(seen, id)
	}
	assert.Equal(t, []string{"bash-1", "bash-2", "agent-1", "bash-3", "agent-2"}, seen)

	// Id order: by kind, then numerically.
	for range 8 {
		e.start("b", "y", newFake())
	}
	var ids []string
	for _, in := range e.r.Snapshot() {
		ids = append(ids, in.ID)
	}
	assert.Equal(t, []string{"agent-1", "agent-2", "bash-1", "bash-2", "bash-3", "bash-4", "bash-5", "bash-6", "bash-7", "bash-8", "bash-9", "bash-10", "bash-11"}, ids)
}

func TestStartValidation(t *testing.T) {
	r := New(Options{})
	_, err := r.Start("a", "", "x", func(string) (Handle, error) { return newFake(), nil })
	assert.True(t, errors.Is(err, ErrInvalidStart))
	_, err = r.Start("a", "bash", "x", nil)
	assert.True(t, errors.Is(err, ErrInvalidStart))
	_, err = r.Start("a", "bash", "x", func(string) (Handle, error) { return nil, nil })
	assert.True(t, errors.Is(err, ErrInvalidStart))
	assert.Empty(t, r.Snapshot())
	assert.Equal(t, DefaultLimit, r.Limit())
	assert.Equal(t, 3, New(Options{Limit: 3}).Limit())
	assert.Equal(t, DefaultLimit, New(Options{Limit: -1}).Limit())
}

func TestOwnershipFence(t *testing.T) {
	cases := []struct {
		name    string
		owner   string // task owner ("" = started with no agent)
		caller  call.Context
		wantErr string
	}{
		{"owner reads its task", "a", session("a"), ""},
		{"other session is fenced", "a", session("b"), "task bash-1 belongs to another session"},
		{"no-agent caller cannot access an owned task", "a", noAgent, "task bash-1 belongs to another session"},
		{"agent with empty session is like no agent", "a", call.Context{Agent: &call.Agent{}}, "task bash-1 belongs to another session"},
		{"unowned task open to a session", "", session("b"), ""},
		{"unowned task open to no-agent caller", "", noAgent, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 0)
			h := newFake()
			id := e.start(tc.owner, "build", h)
			h.write("out")
			in, _ := e.r.Get(id)
			assert.Equal(t, tc.owner, in.Owner, "owner recorded at spawn")

			ops := map[string]call.Result{
				"task_output": callTool(NewTaskOutput(e.r), tc.caller, `{"task_id":"bash-1"}`),
				"bash_output": callTool(NewBashOutput(e.r), tc.caller, `{"task_id":"bash-1"}`),
				"task_kill":   callTool(NewTaskKill(e.r), tc.caller, `{"task_id":"bash-1"}`),
				"bash_kill":   callTool(NewBashKill(e.r), tc.caller, `{"task_id":"bash-1"}`),
			}
			list := callTool(NewTaskList(e.r), tc.caller, `{}`).Text
			for name, res := range ops {
				if tc.wantErr == "" {
					assert.False(t, res.IsError, "%s: %s", name, res.Text)
				} else {
					assert.True(t, res.IsError, name)
					assert.Equal(t, "Error: "+tc.wantErr, res.Text, name)
				}
			}
			if tc.wantErr == "" {
				assert.Equal(t, "bash-1 [bash] stopping \u2014 build", list)
				assert.Equal(t, 1, h.cancelCount())
			} else {
				assert.Equal(t, "(no background tasks)", list, "foreign tasks are not listed")
				assert.Equal(t, 0, h.cancelCount())
				assert.Equal(t, "out", h.Read(), "a fenced read consumes nothing")
			}
		})
	}
}

func TestOwnershipKeptAfterCompletion(t *testing.T) {
	e := newEnv(t, 0)
	h := newFake()
	id := e.start("a", "build", h)
	h.finish(completed0)
	e.settle(id)
	res := callTool(NewTaskOutput(e.r), session("b"), `{"task_id":"bash-1"}`)
	assert.Equal(t, "Error: task bash-1 belongs to another session", res.Text)
	in, _ := e.r.Get(id)
	assert.Equal(t, "a", in.Owner)
}

func TestListVisibility(t *testing.T) {
	e := newEnv(t, 0)
	e.start("a", "a's", newFake())
	e.start("b", "b's", newFake())
	e.start("", "nobody's", newFake())
	e.startKind("a", "agent", "sub", newFake())
	assert.Equal(t, "agent-1 [agent] running \u2014 sub\nbash-1 [bash] running \u2014 a's\nbash-3 [bash] running \u2014 nobody's", e.r.List(session("a")))
	assert.Equal(t, "bash-2 [bash] running \u2014 b's\nbash-3 [bash] running \u2014 nobody's", e.r.List(session("b")))
	assert.Equal(t, "bash-3 [bash] running \u2014 nobody's", e.r.List(noAgent))
	assert.Len(t, e.r.Visible(session("a")), 3)
	assert.Len(t, e.r.Snapshot(), 4)
}

func TestLabelOnOneLine(t *testing.T) {
	e := newEnv(t, 0)
	h := newFake()
	e.start("a", "two\nlines\r\nhere", h)
	assert.Equal(t, "bash-1 [bash] running \u2014 two lines here", e.r.List(session("a")))
	h.finish(completed0)
	e.settle("bash-1")
	assert.Equal(t, []string{"a: background task bash-1 (bash: two lines here) finished [status: completed, exit code: 0]. Read its output with task_output."}, e.nr.all())
}

func TestLimit(t *testing.T) {
	e := newEnv(t, 3)
	limitErr := "background task limit reached for this owner (limit: 3); use task_kill to stop an unneeded task, wait for it to finish, then retry"
	spawned := 0
	spawn := func(h Handle) func(string) (Handle, error) {
		return func(string) (Handle, error) { spawned++; return h, nil }
	}

	hs := []*fakeHandle{newFake(), newFake(), newFake()}
	for _, h := range hs {
		_, err := e.r.Start("a", "bash", "x", spawn(h))
		require.NoError(t, err)
	}
	_, err := e.r.Start("a", "bash", "x", spawn(newFake()))
	require.EqualError(t, err, limitErr)
	assert.Equal(t, 3, spawned, "the preflight runs before spawn")

	// Other owners have their own budget; unowned tasks share one.
	for range 3 {
		_, err = e.r.Start("b", "bash", "x", spawn(newFake()))
		require.NoError(t, err)
		_, err = e.r.Start("", "bash", "x", spawn(newFake()))
		require.NoError(t, err)
	}
	_, err = e.r.Start("", "bash", "x", spawn(newFake()))
	require.EqualError(t, err, limitErr)

	// A stopping task still counts.
	_, err = e.r.Kill(session("a"), "bash-1", "")
	require.NoError(t, err)
	assert.Equal(t, StatusStopping, status(t, e.r, "bash-1"))
	_, err = e.r.Start("a", "bash", "x", spawn(newFake()))
	require.EqualError(t, err, limitErr)

	// An ended task frees its slot (even before the watcher recorded it).
	hs[0].finish(Outcome{Status: StatusKilled, Detail: "signal: SIGTERM"})
	_, err = e.r.Start("a", "bash", "x", spawn(newFake()))
	require.NoError(t, err)
	_, err = e.r.Start("a", "bash", "x", spawn(newFake()))
	require.EqualError(t, err, limitErr)
}

func TestLimitConcurrentStarts(t *testing.T) {
	const limit, tries = 5, 40
	e := newEnv(t, limit)
	var ok, limited, spawning, maxSpawning atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range tries {
		owner := "a"
		if i%2 == 1 {
			owner = "b"
		}
		wg.Go(func() {
			_, err := e.r.Start(owner, "bash", "x", func(string) (Handle, error) {
				n := spawning.Add(1)
				for {
					m := maxSpawning.Load()
					if n <= m || maxSpawning.CompareAndSwap(m, n) {
						break
					}
				}
				<-release
				spawning.Add(-1)
				return newFake(), nil
			})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrLimit):
				limited.Add(1)
			default:
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	// Every Start either reserved a slot (and blocks in spawn) or failed.
	require.Eventually(t, func() bool { return spawning.Load()+limited.Load() == tries }, testtime.Scale(5*time.Second), time.Millisecond)
	close(release)
	wg.Wait()
	assert.Equal(t, int32(2*limit), ok.Load())
	assert.Equal(t, int32(tries-2*limit), limited.Load())
	assert.Equal(t, int32(2*limit), maxSpawning.Load())
	for _, owner := range []string{"a", "b"} {
		assert.Len(t, e.r.Visible(session(owner)), limit)
	}
}

func TestSpawnFailureReleasesSlot(t *testing.T) {
	e := newEnv(t, 1)
	boom := errors.New("spawn failed: no such executor")
	id, err := e.r.Start("a", "bash", "x", func(string) (Handle, error) { return nil, boom })
	assert.Equal(t, "", id)
	assert.Same(t, boom, err, "the spawn error is returned as is")
	assert.Empty(t, e.r.Snapshot(), "no task recorded")

	// A panicking spawn releases its slot too.
	assert.Panics(t, func() {
		_, _ = e.r.Start("a", "bash", "x", func(string) (Handle, error) { panic("boom") })
	})

	id, err = e.r.Start("a", "bash", "x", func(string) (Handle, error) { return newFake(), nil })
	require.NoError(t, err, "the slot was released")
	assert.Equal(t, "bash-3", id, "numbers of failed spawns are not reused")
	assert.Equal(t, "unknown task bash-1", errString(e.r.Kill(session("a"), "bash-1", "")))
}

func errString(_ string, err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestConsumingReads(t *testing.T) {
	e := newEnv(t, 0)
	h := newFake()
	id := e.start("a", "build", h)
	out := NewTaskOutput(e.r)
	c := session("a")

	assert.Equal(t, "(no new output)\n[status: running]", callTool(out, c, `{"task_id":"bash-1"}`).Text)
	h.write("one\n")
	h.write("two\n")
	res := callTool(out, c, `{"task_id":"bash-1"}`)
	assert.Equal(t, "one\ntwo\n[status: running]", res.Text)
	assert.Equal(t, OutputResult{TaskID: id, Status: StatusRunning, Output: "one\ntwo\n", Text: res.Text}, res.Value)
	assert.Equal(t, "(no new output)\n[status: running]", callTool(out, c, `{"task_id":"bash-1"}`).Text)
	h.write("three")
	assert.Equal(t, "three\n[status: running]", callTool(NewBashOutput(e.r), c, `{"task_id":"bash-1"}`).Text, "bash_output shares the read position")
	h.write("last")
	h.finish(completed2)
	assert.Equal(t, "last\n[status: completed, exit code: 2]", callTool(out, c, `{"task_id":"bash-1"}`).Text)
	assert.Equal(t, "(no new output)\n[status: completed, exit code: 2]", callTool(out, c, `{"task_id":"bash-1"}`).Text)
}

func TestStatusTracking(t *testing.T) {
	cases := []struct {
		name    string
		outcome Outcome
		want    Status
		detail  string
	}{
		{"completed", completed0, StatusCompleted, "exit code: 0"},
		{"killed", Outcome{Status: StatusKilled, Detail: "killed before exit"}, StatusKilled, "killed before exit"},
		{"failed", Outcome{Status: StatusFailed, Detail: "sandbox runner failed"}, StatusFailed, "sandbox runner failed"},
		{"non-final outcome", Outcome{Status: StatusRunning}, StatusFailed, `task ended without a final status ("running")`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 0)
			h := newFake()
			id := e.start("a", "x", h)
			assert.Equal(t, StatusRunning, status(t, e.r, id))
			h.finish(tc.outcome)
			e.settle(id)
			in, _ := e.r.Get(id)
			assert.Equal(t, Info{ID: id, Kind: "bash", Label: "x", Owner: "a", Status: tc.want, Detail: tc.detail}, in)
		})
	}
	_, ok := New(Options{}).Get("bash-1")
	assert.False(t, ok)
}

// waitersOf is the number of waits in progress on id.
func waitersOf(r *Runtime, id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tasks[id].waiters
}

func TestWait(t *testing.T) {
	t.Run("times out with the task running", func(t *testing.T) {
		e := newEnv(t, 0)
		h := newFake()
		id := e.start("a", "x", h)
		h.write("partial")
		ms := 30.0
		start := time.Now()
		res, err := e.r.Output(context.Background(), session("a"), id, true, &ms)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
		assert.Equal(t, "partial\n[status: running]", res.Text)
		assert.True(t, res.Waited)
		assert.True(t, res.TimedOut)
		assert.Equal(t, 0, waitersOf(e.r, id))
	})
	t.Run("returns at the end", func(t *testing.T) {
		e := newEnv(t, 0)
		h := newFake()
		id := e.start("a", "x", h)
		got := make(chan call.Result, 1)
		go func() {
			got <- callTool(NewTaskOutput(e.r), session("a"), `{"task_id":"bash-1","wait":true,"timeout_ms":600001}`)
		}()
		require.Eventually(t, func() bool { return waitersOf(e.r, id) == 1 }, testtime.Scale(5*time.Second), time.Millisecond)
		h.write("done\n")
		h.finish(completed0)
		select {
		case res := <-got:
			assert.Equal(t, "done\n[status: completed, exit code: 0]", res.Text)
			v := res.Value.(OutputResult)
			assert.True(t, v.Waited)
			assert.False(t, v.TimedOut)
		case <-time.After(testtime.Scale(5 * time.Second)):
			t.Fatal("wait did not return at the end")
		}
		e.settle(id)
		assert.Empty(t, e.nr.all(), "the wait consumed the end")
	})
	t.Run("task already ended", func(t *testing.T) {
		e := newEnv(t, 0)
		h := newFake()
		id := e.start("a", "x", h)
		h.finish(completed0)
		res, err := e.r.Output(context.Background(), session("a"), id, true, nil)
		require.NoError(t, err)
		assert.Equal(t, "(no new output)\n[status: completed, exit code: 0]", res.Text)
	})
	t.Run("aborted", func(t *testing.T) {
		e := newEnv(t, 0)
		h := newFake()
		id := e.start("a", "x", h)
		h.write("kept")
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan call.Result, 1)
		go func() {
			got <- NewTaskOutput(e.r).Call(ctx, session("a"), []byte(`{"task_id":"bash-1","wait":true}`))
		}()
		require.Eventually(t, func() bool { return waitersOf(e.r, id) == 1 }, testtime.Scale(5*time.Second), time.Millisecond)
		cancel()
		res := <-got
		assert.Equal(t, call.Result{Text: "Error: wait aborted", IsError: true}, res)
		assert.Equal(t, 0, waitersOf(e.r, id))
		assert.Equal(t, "kept", h.Read(), "an aborted wait consumes nothing")
	})
	t.Run("wait timeout capped at 600000", func(t *testing.T) {
		d, err := waitSpec{wait: true, set: true, ms: 1e9, valid: true}.duration()
		require.NoError(t, err)
		assert.Equal(t, 600*time.Second, d)
		d, err = waitSpec{wait: true}.duration()
		require.NoError(t, err)
		assert.Equal(t, 30*time.Second, d)
		d, err = waitSpec{wait: true, set: true, ms: 0.5, valid: true}.duration()
		require.NoError(t, err)
		assert.Equal(t, 500*time.Microsecond, d)
	})
}

func TestInvalidWaitTimeouts(t *testing.T) {
	e := newEnv(t, 0)
	e.start("a", "x", newFake())
	out := NewTaskOutput(e.r)
	for _, tc := range []struct{ raw, got string }{
		{`0`, `0`},
		{`-1`, `-1`},
		{`-0`, `-0`},
		{`"x"`, `"x"`},
		{`"100"`, `"100"`},
		{`1e999`, `1e999`},
		{`-1e999`, `-1e999`},
		{`true`, `true`},
		{`[1, 2]`, `[1,2]`},
		{`{"ms": 5}`, `{"ms":5}`},
	} {
		for _, wait := range []string{"true", "false"} {
			res := callTool(out, session("a"), `{"task_id":"bash-1","wait":`+wait+`,"timeout_ms":`+tc.raw+`}`)
			assert.True(t, res.IsError, tc.raw)
			assert.Equal(t, "Error: invalid wait timeout: expected a positive number of milliseconds, got "+tc.got, res.Text, tc.raw)
		}
	}
	// Null is absent (the default).
	res := callTool(out, session("a"), `{"task_id":"bash-1","timeout_ms":null}`)
	assert.False(t, res.IsError, res.Text)

	// The runtime API renders non-finite values by their JavaScript names.
	for _, tc := range []struct {
		v   float64
		got string
	}{{0, "0"}, {-2.5, "-2.5"}, {math.Inf(1), "Infinity"}, {math.Inf(-1), "-Infinity"}, {math.NaN(), "NaN"}} {
		_, err := e.r.Output(context.Background(), session("a"), "bash-1", true, &tc.v)
		assert.EqualError(t, err, "invalid wait timeout: expected a positive number of milliseconds, got "+tc.got)
	}

	// Ownership is checked first.
	zero := 0.0
	_, err := e.r.Output(context.Background(), session("b"), "bash-1", true, &zero)
	assert.EqualError(t, err, "task bash-1 belongs to another session")
	_, err = e.r.Output(context.Background(), session("b"), "bash-7", true, &zero)
	assert.EqualError(t, err, "unknown task bash-7")
}

func TestKillLifecycle(t *testing.T) {
	e := newEnv(t, 0)
	h := newFake()
	id := e.start("a", "x", h)
	h.write("before kill\n")

	text, err := e.r.Kill(session("a"), id, "no longer needed")
	require.NoError(t, err)
	assert.Equal(t, "requested cancellation of task bash-1", text)
	assert.Equal(t, 1, h.cancelCount())
	in, _ := e.r.Get(id)
	assert.Equal(t, StatusStopping, in.Status)
	assert.Equal(t, "no longer needed", in.KillReason)
	assert.Equal(t, "bash-1 [bash] stopping \u2014 x", e.r.List(session("a")))
	assert.Equal(t, "before kill\n[status: stopping]", callTool(NewTaskOutput(e.r), session("a"), `{"task_id":"bash-1"}`).Text)

	// A second kill while stopping: same answer, no second Cancel.
	res := callTool(NewTaskKill(e.r), session("a"), `{"task_id":"bash-1","reason":"again"}`)
	assert.Equal(t, "requested cancellation of task bash-1", res.Text)
	assert.Equal(t, KillResult{TaskID: id, Status: StatusStopping, Text: res.Text}, res.Value)
	assert.Equal(t, 1, h.cancelCount())

	h.finish(Outcome{Status: StatusKilled, Detail: "signal: SIGTERM"})
	e.settle(id)
	assert.Equal(t, StatusKilled, status(t, e.r, id))
	res = callTool(NewTaskKill(e.r), session("a"), `{"task_id":"bash-1"}`)
	assert.Equal(t, "task bash-1 had already finished [status: killed, signal: SIGTERM]", res.Text)
	assert.False(t, res.IsError, "killing a finished task is a reported no-op")
	assert.Equal(t, KillResult{TaskID: id, Status: StatusKilled, Detail: "signal: SIGTERM", AlreadyFinished: true, Text: res.Text}, res.Value)
	assert.Equal(t, 1, h.cancelCount())
	assert.Empty(t, e.nr.all(), "the owner killed it: no notice")
}

func TestKillMayEndOtherwise(t *testing.T) {
	// A task that exits on its own after the kill request ends as it ended.
	e := newEnv(t, 0)
	h := newFake()
	id := e.start("a", "x", h)
	_, err := e.r.Kill(session("a"), id, "")
	require.NoError(t, err)
	h.finish(completed0)
	e.settle(id)
	in, _ := e.r.Get(id)
	assert.Equal(t, StatusCompleted, in.Status)
	assert.Equal(t, "exit code: 0", in.Detail)
}

func TestNotices(t *testing.T) {
	notice := "a: background task bash-1 (bash: build) finished [status: completed, exit code: 0]. Read its output with task_output."
	cases := []struct {
		name  string
		owner string
		run   func(t *testing.T, e *env, h *fakeHandle)
		want  []string
	}{
		{"plain end", "a", func(t *testing.T, e *env, h *fakeHandle) {
			h.finish(completed0)
		}, []string{notice}},
		{"read while running, then end", "a", func(t *testing.T, e *env, h *fakeHandle) {
			_, err := e.r.Output(context.Background(), session("a"), "bash-1", false, nil)
			require.NoError(t, err)
			h.finish(completed0)
		}, []string{notice}},
		{"listed after the end (listing consumes nothing)", "a", func(t *testing.T, e *env, h *fakeHandle) {
			h.finish(completed0)
			e.settle("bash-1")
			e.r.List(session("a"))
		}, []string{notice}},
		{"read after the notice: still one notice", "a", func(t *testing.T, e *env, h *fakeHandle) {
			h.finish(completed0)
			e.settle("bash-1")
			_, err := e.r.Output(context.Background(), session("a"), "bash-1", false, nil)
			require.NoError(t, err)
			_, err = e.r.Kill(session("a"), "bash-1", "")
			require.NoError(t, err)
		}, []string{notice}},
		{"read terminally before the watcher", "a", func(t *testing.T, e *env, h *fakeHandle) {
			release := e.holdWatchers()
			h.finish(completed0)
			_, err := e.r.Output(context.Background(), session("a"), "bash-1", false, nil)
			require.NoError(t, err)
			release()
		}, nil},
		{"bash_output read terminally", "a", func(t *testing.T, e *env, h *fakeHandle) {
			release := e.holdWatchers()
			h.finish(completed0)
			callTool(NewBashOutput(e.r), session("a"), `{"task_id":"bash-1"}`)
			release()
		}, nil},
		{"killed by the owner", "a", func(t *testing.T, e *env, h *fakeHandle) {
			_, err := e.r.Kill(session("a"), "bash-1", "")
			require.NoError(t, err)
			h.finish(Outcome{Status: StatusKilled, Detail: "signal: SIGTERM"})
		}, nil},
		{"bash_kill by the owner", "a", func(t *testing.T, e *env, h *fakeHandle) {
			callTool(NewBashKill(e.r), session("a"), `{"task_id":"bash-1"}`)
			h.finish(Outcome{Status: StatusKilled, Detail: "signal: SIGTERM"})
		}, nil},
		{"kill of the finished task before the watcher", "a", func(t *testing.T, e *env, h *fakeHandle) {
			release := e.holdWatchers()
			h.finish(completed0)
			_, err := e.r.Kill(session("a"), "bash-1", "")
			require.NoError(t, err)
			release()
		}, nil},
		{"waited", "a", func(t *testing.T, e *env, h *fakeHandle) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = e.r.Output(context.Background(), session("a"), "bash-1", true, nil)
			}()
			require.Eventually(t, func() bool { return waitersOf(e.r, "bash-1") == 1 }, testtime.Scale(5*time.Second), time.Millisecond)
			h.finish(completed0)
			<-done
		}, nil},
		{"wait timed out, then end", "a", func(t *testing.T, e *env, h *fakeHandle) {
			ms := 1.0
			_, err := e.r.Output(context.Background(), session("a"), "bash-1", true, &ms)
			require.NoError(t, err)
			h.finish(completed0)
		}, []string{notice}},
		{"wait aborted, then end", "a", func(t *testing.T, e *env, h *fakeHandle) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = e.r.Output(ctx, session("a"), "bash-1", true, nil)
			}()
			require.Eventually(t, func() bool { return waitersOf(e.r, "bash-1") == 1 }, testtime.Scale(5*time.Second), time.Millisecond)
			cancel()
			<-done
			h.finish(completed0)
		}, []string{notice}},
		{"end held by a wait, then the wait aborted", "a", func(t *testing.T, e *env, h *fakeHandle) {
			// The end arrives while a wait is in progress (held), and
			// the wait is then aborted: the notice goes out.
			e.r.mu.Lock()
			e.r.tasks["bash-1"].waiters++ // a wait in progress
			e.r.mu.Unlock()
			h.finish(completed0)
			e.settle("bash-1")
			assert.Empty(t, e.nr.all(), "held while the wait is in progress")
			e.r.mu.Lock()
			tk := e.r.tasks["bash-1"]
			tk.waiters--
			n := e.r.takeNoticeLocked(tk)
			e.r.mu.Unlock()
			e.r.deliver(n)
		}, []string{notice}},
		{"disposed", "a", func(t *testing.T, e *env, h *fakeHandle) {
			h.killOnCancel = true
			require.NoError(t, e.r.Dispose(context.Background(), "a"))
		}, nil},
		{"unowned task", "", func(t *testing.T, e *env, h *fakeHandle) {
			h.finish(completed0)
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 0)
			h := newFake()
			id := e.start(tc.owner, "build", h)
			tc.run(t, e, h)
			e.settle(id)
			assert.Equal(t, tc.want, e.nr.all())
		})
	}
}

func TestNoNotifier(t *testing.T) {
	r := New(Options{})
	h := newFake()
	id, err := r.Start("a", "bash", "x", func(string) (Handle, error) { return h, nil })
	require.NoError(t, err)
	h.finish(completed0)
	res, err := r.Output(context.Background(), session("a"), id, true, nil)
	require.NoError(t, err)
	assert.Equal(t, "(no new output)\n[status: completed, exit code: 0]", res.Text)
}

func TestDispose(t *testing.T) {
	e := newEnv(t, 0)
	a1, a2 := newKillable(), newKillable()
	a3 := newFake() // ends by itself before the dispose
	b1 := newKillable()
	u := newKillable()
	e.start("a", "a1", a1)
	e.start("a", "a2", a2)
	e.start("a", "a3", a3)
	e.start("b", "b1", b1)
	e.start("", "u", u)
	a3.finish(completed0)
	e.settle("bash-3")
	require.Len(t, e.nr.all(), 1)

	require.NoError(t, e.r.Dispose(context.Background(), "a"))
	assert.Equal(t, StatusKilled, status(t, e.r, "bash-1"), "awaited")
	assert.Equal(t, StatusKilled, status(t, e.r, "bash-2"))
	assert.Equal(t, StatusCompleted, status(t, e.r, "bash-3"))
	assert.Equal(t, 1, a1.cancelCount())
	assert.Equal(t, 0, a3.cancelCount(), "ended tasks are not cancelled")
	assert.Equal(t, StatusRunning, status(t, e.r, "bash-4"), "other owners untouched")
	assert.Equal(t, StatusRunning, status(t, e.r, "bash-5"), "unowned untouched")
	assert.Equal(t, 0, b1.cancelCount())
	assert.Len(t, e.nr.all(), 1, "no notices for disposed tasks")

	// The owner can start again afterwards, and its history stays owned.
	e.start("a", "again", newKillable())
	assert.Equal(t, "Error: task bash-1 belongs to another session", callTool(NewTaskOutput(e.r), session("b"), `{"task_id":"bash-1"}`).Text)

	require.NoError(t, e.r.Close(context.Background()))
	for _, in := range e.r.Snapshot() {
		assert.True(t, in.Status.Ended(), in.ID)
	}
}

func TestDisposeRespectsContext(t *testing.T) {
	e := newEnv(t, 0)
	stubborn := newFake() // ignores Cancel
	e.start("a", "x", stubborn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := e.r.Dispose(ctx, "a")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 1, stubborn.cancelCount())
	assert.Equal(t, StatusStopping, status(t, e.r, "bash-1"))

	// A Dispose in progress rejects Starts of that owner only.
	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.r.Dispose(ctx2, "a") }()
	require.Eventually(t, func() bool {
		e.r.mu.Lock()
		defer e.r.mu.Unlock()
		return e.r.disposing["a"] == 1
	}, testtime.Scale(5*time.Second), time.Millisecond)
	_, err = e.r.Start("a", "bash", "y", func(string) (Handle, error) { return newFake(), nil })
	assert.ErrorIs(t, err, ErrDisposing)
	e.start("b", "y", newFake())
	stubborn.finish(Outcome{Status: StatusKilled, Detail: "killed before exit"})
	assert.NoError(t, <-done)
	cancel2()
	assert.Equal(t, StatusKilled, status(t, e.r, "bash-1"))
	e.start("a", "z", newFake())
}

func TestDisposeDuringSpawn(t *testing.T) {
	// A Start already spawning when Dispose begins is registered, then
	// cancelled at once; Dispose awaits it.
	e := newEnv(t, 0)
	h := newKillable()
	inSpawn, release := make(chan struct{}), make(chan struct{})
	started := make(chan string, 1)
	go func() {
		id, err := e.r.Start("a", "bash", "x", func(string) (Handle, error) {
			close(inSpawn)
			<-release
			return h, nil
		})
		assert.NoError(t, err)
		started <- id
	}()
	<-inSpawn
	disposed := make(chan error, 1)
	go func() { disposed <- e.r.Dispose(context.Background(), "a") }()
	select {
	case <-disposed:
		t.Fatal("Dispose returned while a Start was spawning")
	case <-time.After(testtime.Scale(20 * time.Millisecond)): // longer: a stronger check
	}
	close(release)
	require.NoError(t, <-disposed)
	id := <-started
	assert.Equal(t, StatusKilled, status(t, e.r, id))
	assert.Equal(t, 1, h.cancelCount())
}

func TestClose(t *testing.T) {
	e := newEnv(t, 0)
	hs := []*fakeHandle{newKillable(), newKillable(), newKillable()}
	for i, h := range hs {
		e.start(fmt.Sprint("s", i), "x", h)
	}
	e.start("", "u", newKillable())
	require.NoError(t, e.r.Close(context.Background()))
	for _, in := range e.r.Snapshot() {
		assert.Equal(t, StatusKilled, in.Status, in.ID)
	}
	assert.Empty(t, e.nr.all())
	_, err := e.r.Start("s0", "bash", "x", func(string) (Handle, error) { return newFake(), nil })
	assert.ErrorIs(t, err, ErrClosed)
	assert.NoError(t, e.r.Close(context.Background()), "Close twice")
}

func TestConcurrentUse(t *testing.T) {
	// Reads, waits, lists, kills and ends racing (meaningful under -race).
	e := newEnv(t, 100)
	var wg sync.WaitGroup
	for i := range 20 {
		owner := fmt.Sprint("s", i%4)
		h := newKillable()
		id := e.start(owner, "x", h)
		c := session(owner)
		wg.Go(func() {
			for j := range 50 {
				h.write(fmt.Sprint(j, "\n"))
			}
			h.finish(completed0)
		})
		wg.Go(func() {
			ms := 5.0
			for range 10 {
				_, err := e.r.Output(context.Background(), c, id, true, &ms)
				assert.NoError(t, err)
				e.r.List(c)
			}
		})
		if i%3 == 0 {
			wg.Go(func() { _, _ = e.r.Kill(c, id, "") })
		}
	}
	wg.Wait()
	require.NoError(t, e.r.Close(context.Background()))
	for _, in := range e.r.Snapshot() {
		assert.True(t, in.Status.Ended(), in.ID)
	}
	assert.LessOrEqual(t, len(e.nr.all()), 20)
}
