package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/tasks"
)

type noticeLog struct {
	mu  sync.Mutex
	got []string
}

func (n *noticeLog) Notify(owner, text string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, owner+": "+text)
}

func (n *noticeLog) list() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.got...)
}

// taskTool finds a task tool by name.
func taskTool(t *testing.T, rt *tasks.Runtime, name string) call.Tool {
	t.Helper()
	for _, tl := range tasks.Tools(rt) {
		if tl.Name() == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

type bgFixture struct {
	t       *testing.T
	b       *Bash
	rt      *tasks.Runtime
	notices *noticeLog
	ws      string
	s1, s2  call.Context
}

func newBackground(t *testing.T, limit int) *bgFixture {
	e, ws := newExecutor(t, modes.WorkspaceWrite)
	notices := &noticeLog{}
	rt := tasks.New(tasks.Options{Limit: limit, Notifier: notices})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testtime.Scale(10*time.Second))
		defer cancel()
		rt.Close(ctx)
	})
	return &bgFixture{t: t, b: newBash(t, Options{Executor: e, Tasks: rt}), rt: rt, notices: notices, ws: ws,
		s1: call.Context{Agent: &call.Agent{Session: "s1", Workspace: ws}},
		s2: call.Context{Agent: &call.Agent{Session: "s2", Workspace: ws}}}
}

func (f *bgFixture) start(c call.Context, command, description string) call.Result {
	return f.b.Call(context.Background(), c, args(f.t, map[string]any{"command": command, "description": description, "run_in_background": true}))
}

func (f *bgFixture) tool(c call.Context, name string, a map[string]any) call.Result {
	return taskTool(f.t, f.rt, name).Call(context.Background(), c, args(f.t, a))
}

func TestBackgroundStartReadWait(t *testing.T) {
	f := newBackground(t, 0)
	// "two" comes once the test has read "one" (it creates the file go), so
	// that the first read cannot see both however slow the machine.
	goFile := filepath.Join(f.ws, "go")
	r := f.start(f.s1, fmt.Sprintf("echo one; while [ ! -e %q ]; do sleep 0.01; done; echo two >&2", goFile), "Print twice")
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "started background task bash-1", r.Text)
	assert.Equal(t, Value{Kind: "background", TaskID: "bash-1"}, r.Value)

	// The other session cannot read or kill it.
	for _, name := range []string{"task_output", "task_kill", "bash_output", "bash_kill"} {
		o := f.tool(f.s2, name, map[string]any{"task_id": "bash-1"})
		assert.True(t, o.IsError, name)
		assert.Equal(t, "Error: task bash-1 belongs to another session", o.Text, name)
	}
	assert.Equal(t, "(no background tasks)", f.tool(f.s2, "task_list", nil).Text)
	assert.Equal(t, "bash-1 [bash] running — Print twice", f.tool(f.s1, "task_list", nil).Text)

	// Consuming reads: the first sees "one" (once it is there), waiting
	// returns the rest and the end, then nothing is new.
	var first string
	require.Eventually(t, func() bool {
		first = f.tool(f.s1, "task_output", map[string]any{"task_id": "bash-1"}).Text
		return strings.Contains(first, "one")
	}, testtime.Scale(5*time.Second), 20*time.Millisecond)
	assert.Equal(t, "one\n[status: running]", first)
	require.NoError(t, os.WriteFile(goFile, nil, 0o644))
	o := f.tool(f.s1, "task_output", map[string]any{"task_id": "bash-1", "wait": true, "timeout_ms": testtime.Ms(10000)})
	assert.Equal(t, "[stderr]\ntwo\n[status: completed, exit code: 0]", o.Text)
	o = f.tool(f.s1, "task_output", map[string]any{"task_id": "bash-1"})
	assert.Equal(t, "(no new output)\n[status: completed, exit code: 0]", o.Text)
	assert.Empty(t, f.notices.list(), "the owner consumed the end: no notice")
}

func TestBackgroundDenialAfterSettle(t *testing.T) {
	f := newBackground(t, 0)
	target := filepath.Join(outsideDir(t), "denied")
	r := f.start(f.s1, fmt.Sprintf("echo x > %s; echo done; exit 3", target), "Write outside the workspace")
	require.False(t, r.IsError, r.Text)
	o := f.tool(f.s1, "task_output", map[string]any{"task_id": "bash-1", "wait": true})
	assert.Contains(t, o.Text, "done\n[stderr]\n")
	assert.True(t, strings.HasSuffix(o.Text, "\n[sandbox: file access denied under workspace-write mode]\n"+
		SuggestionMarker([]string{"--allow-write " + filepath.Dir(target)})+"\n"+EscalationHint+"\n[status: completed, exit code: 3]"), o.Text)
	assert.NoFileExists(t, target)
	// The marker is reported once.
	assert.Equal(t, "(no new output)\n[status: completed, exit code: 3]", f.tool(f.s1, "task_output", map[string]any{"task_id": "bash-1"}).Text)

	// A task that succeeded despite a denial gets the quiet note only.
	r = f.start(f.s1, fmt.Sprintf("{ echo x > %s; } 2>/dev/null; echo done", target), "Survive a denial")
	require.False(t, r.IsError, r.Text)
	o = f.tool(f.s1, "task_output", map[string]any{"task_id": "bash-2", "wait": true})
	assert.Equal(t, "done\n"+SurvivedDenialNote+"\n[status: completed, exit code: 0]", o.Text)
	assert.NoFileExists(t, target)
}

func TestBackgroundKillAndNotice(t *testing.T) {
	f := newBackground(t, 0)
	require.False(t, f.start(f.s1, "sleep 30", "Sleep a long time").IsError)
	k := f.tool(f.s1, "task_kill", map[string]any{"task_id": "bash-1"})
	assert.Equal(t, "requested cancellation of task bash-1", k.Text)
	o := f.tool(f.s1, "task_output", map[string]any{"task_id": "bash-1", "wait": true})
	assert.Equal(t, "(no new output)\n[status: killed, signal: SIGTERM]", o.Text)
	k = f.tool(f.s1, "task_kill", map[string]any{"task_id": "bash-1"})
	assert.Equal(t, "task bash-1 had already finished [status: killed, signal: SIGTERM]", k.Text)

	// A task that ends unread leaves a notice in its owner's session.
	require.False(t, f.start(f.s2, "exit 3", "Fail on purpose").IsError)
	require.Eventually(t, func() bool { return len(f.notices.list()) == 1 }, testtime.Scale(5*time.Second), 10*time.Millisecond)
	assert.Equal(t, []string{"s2: background task bash-2 (bash: Fail on purpose) finished [status: completed, exit code: 3]. Read its output with task_output."}, f.notices.list())
}

func TestBackgroundLimitSpawnsNothing(t *testing.T) {
	f := newBackground(t, 2)
	require.False(t, f.start(f.s1, "sleep 30", "First sleeper").IsError)
	require.False(t, f.start(f.s1, "sleep 30", "Second sleeper").IsError)
	marker := filepath.Join(f.ws, "third-ran")
	r := f.start(f.s1, "touch "+marker+"; sleep 30", "Third sleeper")
	assert.True(t, r.IsError)
	assert.Equal(t, "Error: background task limit reached for this owner (limit: 2); use task_kill to stop an unneeded task, wait for it to finish, then retry", r.Text)
	time.Sleep(testtime.Scale(100 * time.Millisecond)) // longer: a stronger check
	assert.NoFileExists(t, marker)
	assert.False(t, f.start(f.s2, "true", "Other owner").IsError, "the limit is per owner")
}

func TestBackgroundLossyRead(t *testing.T) {
	f := newBackground(t, 0)
	require.False(t, f.start(f.s1, "head -c 200000 /dev/zero | tr '\\0' a; echo; echo end", "Print a lot").IsError)
	o := f.tool(f.s1, "task_output", map[string]any{"task_id": "bash-1", "wait": true})
	require.False(t, o.IsError, o.Text)
	i := strings.Index(o.Text, "[some output was dropped from memory; full output: ")
	require.GreaterOrEqual(t, i, 0, o.Text[len(o.Text)-300:])
	path := strings.TrimSuffix(strings.SplitN(o.Text[i+len("[some output was dropped from memory; full output: "):], "]", 2)[0], "]")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, 200000+len("\nend\n"), len(b), "the spill holds the whole stream")
}

func TestValueJSON(t *testing.T) {
	e, _ := newExecutor(t, modes.ReadOnly)
	r := newBash(t, Options{Executor: e}).Call(context.Background(), call.Context{}, args(t, map[string]any{"command": "echo hi; exit 4", "description": "Echo and fail"}))
	b, err := json.Marshal(r.Value)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(b, &v))
	assert.Equal(t, "foreground", v["kind"])
	assert.Equal(t, float64(4), v["exitCode"])
	assert.Equal(t, "hi\n", v["stdout"].(map[string]any)["text"])
	assert.Equal(t, "hi\n[exit code: 4]", r.Text)
}

func TestTaskHandleReleasesTheProcessAfterTheLastRead(t *testing.T) {
	e, _ := newExecutor(t, modes.WorkspaceWrite)
	p, err := e.Start(context.Background(), sandboxRequest("echo out; exit 3"))
	require.NoError(t, err)
	h := newTaskHandle(p, true)
	<-h.Done()
	assert.Equal(t, tasks.Outcome{Status: tasks.StatusCompleted, Detail: "exit code: 3"}, h.Outcome())
	assert.Equal(t, "out", h.Read())
	assert.Nil(t, h.p, "the finished process is released")
	assert.Equal(t, "", h.Read())
	assert.Equal(t, tasks.Outcome{Status: tasks.StatusCompleted, Detail: "exit code: 3"}, h.Outcome())
	h.Cancel() // a no-op once finished
}
