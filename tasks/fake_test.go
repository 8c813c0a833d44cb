package tasks

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

// fakeHandle is a scripted task: output written by the test, an outcome
// set by finish, and (with killOnCancel) an end as killed on Cancel.
type fakeHandle struct {
	mu           sync.Mutex
	buf          strings.Builder
	outcome      Outcome
	cancels      int
	killOnCancel bool

	done     chan struct{}
	once     sync.Once
	canceled chan struct{} // closed on the first Cancel
	cOnce    sync.Once
}

func newFake() *fakeHandle {
	return &fakeHandle{done: make(chan struct{}), canceled: make(chan struct{})}
}

func newKillable() *fakeHandle {
	f := newFake()
	f.killOnCancel = true
	return f
}

func (f *fakeHandle) write(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf.WriteString(s)
}

func (f *fakeHandle) finish(o Outcome) {
	f.once.Do(func() {
		f.mu.Lock()
		f.outcome = o
		f.mu.Unlock()
		close(f.done)
	})
}

func (f *fakeHandle) Read() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.buf.String()
	f.buf.Reset()
	return s
}

func (f *fakeHandle) Cancel() {
	f.mu.Lock()
	f.cancels++
	kill := f.killOnCancel
	f.mu.Unlock()
	f.cOnce.Do(func() { close(f.canceled) })
	if kill {
		f.finish(Outcome{Status: StatusKilled, Detail: "signal: SIGTERM"})
	}
}

func (f *fakeHandle) cancelCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancels
}

func (f *fakeHandle) Done() <-chan struct{} { return f.done }

func (f *fakeHandle) Outcome() Outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outcome
}

var (
	completed0 = Outcome{Status: StatusCompleted, Detail: "exit code: 0"}
	completed2 = Outcome{Status: StatusCompleted, Detail: "exit code: 2"}
)

// recorder is a Notifier that records notices.
type recorder struct {
	mu      sync.Mutex
	notices []string // "<owner>: <text>"
}

func (n *recorder) Notify(owner, text string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notices = append(n.notices, owner+": "+text)
}

func (n *recorder) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.notices...)
}

// session returns the call context of an agent of that session ("" = no
// agent).
func session(s string) call.Context {
	if s == "" {
		return call.Context{ID: "call-x"}
	}
	return call.Context{Agent: &call.Agent{Session: s, Workspace: "/w/" + s}, ID: "call-" + s}
}

var noAgent = call.Context{ID: "call-none"}

// env is a runtime with a notice recorder.
type env struct {
	t  *testing.T
	r  *Runtime
	nr *recorder
}

func newEnv(t *testing.T, limit int) *env {
	t.Helper()
	nr := &recorder{}
	e := &env{t: t, r: New(Options{Limit: limit, Notifier: nr}), nr: nr}
	return e
}

// start starts a task of kind "bash" owned by owner with h.
func (e *env) start(owner, label string, h Handle) string {
	e.t.Helper()
	return e.startKind(owner, "bash", label, h)
}

func (e *env) startKind(owner, kind, label string, h Handle) string {
	e.t.Helper()
	id, err := e.r.Start(owner, kind, label, func(string) (Handle, error) { return h, nil })
	require.NoError(e.t, err)
	return id
}

// holdWatchers makes every watcher wait, once its handle is done, until
// release is called: what the test does before release happens before the
// watcher records the end. Call it before finishing the handle.
func (e *env) holdWatchers() (release func()) {
	gate := make(chan struct{})
	e.r.watchHook = func() { <-gate }
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	e.t.Cleanup(release)
	return release
}

// settle waits until the watchers of ids recorded their ends and
// delivered their notices (if any).
func (e *env) settle(ids ...string) {
	e.t.Helper()
	for _, id := range ids {
		e.r.mu.Lock()
		t := e.r.tasks[id]
		e.r.mu.Unlock()
		require.NotNil(e.t, t, "task %s", id)
		select {
		case <-t.watched:
		case <-time.After(testtime.Scale(5 * time.Second)):
			e.t.Fatalf("task %s: watcher did not finish", id)
		}
	}
}

// callTool runs a tool with raw JSON arguments.
func callTool(tl call.Tool, c call.Context, args string) call.Result {
	return tl.Call(context.Background(), c, json.RawMessage(args))
}

func status(t *testing.T, r *Runtime, id string) Status {
	t.Helper()
	in, ok := r.Get(id)
	require.True(t, ok, "task %s", id)
	return in.Status
}
