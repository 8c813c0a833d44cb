package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/envreg"
	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// outsideDir is a directory outside every writable root (not under /tmp,
// /dev/shm or $TMPDIR), writable by DAC.
func outsideDir(t *testing.T) string {
	t.Helper()
	parent := "/var/tmp"
	if os.Geteuid() == 0 {
		parent = "/var/lib"
	}
	d, err := os.MkdirTemp(parent, "dsh-tool-out-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// newExecutor makes an executor whose grace between SIGTERM and SIGKILL is
// short, so that the tests that kill are quick.
func newExecutor(t *testing.T, mode modes.Mode) (*executor.Executor, string) {
	t.Helper()
	return newExecutorGrace(t, mode, 300*time.Millisecond)
}

func newExecutorGrace(t *testing.T, mode modes.Mode, grace time.Duration) (*executor.Executor, string) {
	t.Helper()
	ws := t.TempDir()
	e, err := executor.New(executor.Config{Mode: mode, Workspace: ws, SpillDir: t.TempDir(), KillGrace: testtime.Scale(grace)})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	return e, ws
}

func newBash(t *testing.T, o Options) *Bash {
	t.Helper()
	b, err := New(o)
	require.NoError(t, err)
	return b
}

func args(t *testing.T, kv map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(kv)
	require.NoError(t, err)
	return b
}

// countingApprover answers with a fixed outcome and counts the prompts.
type countingApprover struct {
	outcome ApprovalOutcome
	calls   atomic.Int32
	last    ApprovalRequest
	before  func() // runs before answering
}

func (a *countingApprover) Approve(ctx context.Context, r ApprovalRequest) ApprovalOutcome {
	a.calls.Add(1)
	a.last = r
	if a.before != nil {
		a.before()
	}
	return a.outcome
}

func TestSchemaVariants(t *testing.T) {
	confining, _ := newExecutor(t, modes.WorkspaceWrite)
	open, _ := newExecutor(t, modes.DangerFullAccess)
	props := func(b *Bash) map[string]any {
		var s struct {
			Schema     string         `json:"$schema"`
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		}
		require.NoError(t, json.Unmarshal(b.Schema(), &s))
		assert.Equal(t, "https://json-schema.org/draft/2020-12/schema", s.Schema)
		assert.Equal(t, []string{"command", "description"}, s.Required)
		return s.Properties
	}
	p := props(newBash(t, Options{Executor: confining}))
	assert.Contains(t, p, "run_in_background")
	assert.Contains(t, p, "sandbox_permissions")
	assert.Contains(t, p, "justification")
	assert.Equal(t, []any{"workspace-write", "danger-full-access"}, p["sandbox_permissions"].(map[string]any)["enum"])

	p = props(newBash(t, Options{Executor: confining, DisableBackground: true}))
	assert.NotContains(t, p, "run_in_background")

	b := newBash(t, Options{Executor: open})
	p = props(b)
	assert.NotContains(t, p, "sandbox_permissions")
	assert.NotContains(t, p, "justification")
	assert.NotContains(t, b.Description(), "sandbox_permissions")
	assert.Contains(t, newBash(t, Options{Executor: confining}).Description(), "sandbox_permissions")
}

func TestSystemPromptSection(t *testing.T) {
	assert.Equal(t, PromptSection{ID: "tool:bash", Order: 105,
		Text: "Check the [exit code: N] marker on every bash result; investigate failures before moving on."}, SystemPromptSection())
}

func TestCallRefusals(t *testing.T) {
	confining, _ := newExecutor(t, modes.ReadOnly)
	open, _ := newExecutor(t, modes.DangerFullAccess)
	agent := &call.Agent{Session: "s1"}
	esc := func(mode string) map[string]any {
		return map[string]any{"command": "touch x", "description": "Create a file", "sandbox_permissions": mode, "justification": "it must write"}
	}
	sessions := &SessionModes{}
	require.NoError(t, sessions.SetSessionMode("s-ww", modes.WorkspaceWrite))
	tests := []struct {
		name     string
		o        Options
		c        call.Context
		args     map[string]any
		want     string
		prompted bool
	}{
		{"background disabled", Options{Executor: confining, DisableBackground: true}, call.Context{Agent: agent},
			map[string]any{"command": "ls", "description": "List", "run_in_background": true}, "background execution is disabled for this bash tool", false},
		{"no task runtime", Options{Executor: confining}, call.Context{Agent: agent},
			map[string]any{"command": "ls", "description": "List", "run_in_background": true},
			"background tasks unavailable: load @deepseek-ai/dsh-tasks and @deepseek-ai/dsh-tool-tasks", false},
		{"no sandboxing executor", Options{Executor: open}, call.Context{Agent: agent}, esc("danger-full-access"),
			"sandbox_permissions is not available in this composition (no sandboxing executor to escalate)", false},
		{"not strictly wider than the session's mode", Options{Executor: confining, Sessions: sessions}, call.Context{Agent: &call.Agent{Session: "s-ww"}}, esc("workspace-write"),
			`sandbox escalation to "workspace-write" is not strictly wider than this call's current "workspace-write" mode`, false},
		{"no approval service", Options{Executor: confining}, call.Context{Agent: agent}, esc("workspace-write"),
			`sandbox escalation to "workspace-write" requires approval, but no approval service is composed`, false},
		{"no agent", Options{Executor: confining}, call.Context{}, esc("danger-full-access"),
			`sandbox escalation to "danger-full-access" requires approval, but the call has no agent to route it through`, false},
		{"no channel", Options{Executor: confining}, call.Context{Agent: agent}, esc("workspace-write"),
			`sandbox escalation to "workspace-write" requires approval, but no approval channel is available`, true},
		{"rejected", Options{Executor: confining}, call.Context{Agent: agent}, esc("workspace-write"),
			`the user rejected escalating this command to "workspace-write"`, true},
		{"cancelled", Options{Executor: confining}, call.Context{Agent: agent}, esc("danger-full-access"),
			`approval for escalating to "danger-full-access" was cancelled`, true},
	}
	outcomes := map[string]ApprovalOutcome{"no channel": Unavailable, "rejected": Rejected, "cancelled": Cancelled,
		"no agent": AllowedOnce, "not strictly wider than the session's mode": AllowedOnce}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ap := &countingApprover{outcome: outcomes[tt.name]}
			if tt.o.Approver == nil && tt.name != "no approval service" {
				tt.o.Approver = ap
			}
			r := newBash(t, tt.o).Call(context.Background(), tt.c, args(t, tt.args))
			assert.True(t, r.IsError)
			assert.Equal(t, "Error: "+tt.want, r.Text)
			assert.Equal(t, tt.prompted, ap.calls.Load() == 1, "prompted")
		})
	}
}

// TestEscalationAllowedGrants: the approver may answer an escalation with
// the narrow grants the last run's denials suggested instead of the wider
// mode: the retry runs in its own mode with that directory writable, and a
// write elsewhere is still denied.
func TestEscalationAllowedGrants(t *testing.T) {
	e, ws := newExecutor(t, modes.WorkspaceWrite)
	ap := &countingApprover{outcome: AllowedGrants}
	b := newBash(t, Options{Executor: e, Approver: ap})
	c := call.Context{Agent: &call.Agent{Session: "s1", Workspace: ws}, ID: "call-9"}
	out, other := outsideDir(t), outsideDir(t)
	cmd := "echo hi > " + out + "/f; echo no > " + other + "/g"

	r := b.Call(context.Background(), c, args(t, map[string]any{"command": cmd, "description": "Write two files"}))
	require.False(t, r.IsError, r.Text)
	assert.NoFileExists(t, filepath.Join(out, "f"))

	// The escalation asks for danger-full-access; the approver grants only
	// what the denials suggested.
	r = b.Call(context.Background(), c, args(t, map[string]any{"command": cmd, "description": "Write two files",
		"sandbox_permissions": "danger-full-access", "justification": "The test needs its output file."}))
	require.False(t, r.IsError, r.Text)
	require.EqualValues(t, 1, ap.calls.Load())
	assert.ElementsMatch(t, []sandbox.Suggestion{
		{Setting: "allow_write", Value: out, Flag: "--allow-write " + out, Config: `allow_write = ["` + out + `"]`},
		{Setting: "allow_write", Value: other, Flag: "--allow-write " + other, Config: `allow_write = ["` + other + `"]`},
	}, ap.last.Grants)
	assert.FileExists(t, filepath.Join(out, "f"))
	assert.FileExists(t, filepath.Join(other, "g"))
	v, ok := r.Value.(Value)
	require.True(t, ok)
	assert.Equal(t, modes.WorkspaceWrite, v.RunResult.Sandbox.Mode, "the grants keep the call's own mode")

	// A write the grants do not cover is still denied.
	third := outsideDir(t)
	r = b.Call(context.Background(), c, args(t, map[string]any{"command": "echo x > " + third + "/h", "description": "Write elsewhere"}))
	require.False(t, r.IsError, r.Text)
	assert.NoFileExists(t, filepath.Join(third, "h"))
}

func TestEscalationAllowedOnce(t *testing.T) {
	e, ws := newExecutor(t, modes.WorkspaceWrite)
	sessions := &SessionModes{}
	require.NoError(t, sessions.SetSessionMode("s1", modes.ReadOnly))
	ap := &countingApprover{outcome: AllowedOnce}
	b := newBash(t, Options{Executor: e, Sessions: sessions, Approver: ap})
	c := call.Context{Agent: &call.Agent{Session: "s1", Workspace: ws}, ID: "call-7"}
	target := filepath.Join(ws, "out.txt")
	cmd := "echo hi > out.txt"

	r := b.Call(context.Background(), c, args(t, map[string]any{"command": cmd, "description": "Write a file"}))
	require.False(t, r.IsError, r.Text)
	assert.Contains(t, r.Text, "[sandbox: file access denied under read-only mode]\n"+EscalationHint+"\n[exit code: 1]")
	assert.NoFileExists(t, target)

	r = b.Call(context.Background(), c, args(t, map[string]any{"command": cmd, "description": "Write a file",
		"sandbox_permissions": "workspace-write", "justification": "The test needs its output file."}))
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "(no output)", r.Text)
	assert.FileExists(t, target)
	// The request shows what is approved: the command, where, from which
	// mode to which, why, and what the sandbox denied the last time.
	got := ap.last
	require.NotEmpty(t, got.Denials, "the facts of the denied call")
	assert.Contains(t, got.Denials, sandbox.Denial{Op: "write", Path: target, Syscall: got.Denials[0].Syscall, Errno: "EROFS", Count: 1,
		Suggest: &sandbox.Suggestion{Setting: "mode", Value: "workspace-write", Flag: "--mode workspace-write", Config: `mode = "workspace-write"`}})
	got.Denials = nil
	assert.Equal(t, ApprovalRequest{Agent: c.Agent, Tool: "bash", CallID: "call-7",
		Reason:  "escalate sandbox to workspace-write: The test needs its output file.",
		Command: cmd, Description: "Write a file", Workdir: ws,
		Current: modes.ReadOnly, Requested: modes.WorkspaceWrite,
		Justification: "The test needs its output file."}, got)
	v := r.Value.(Value)
	assert.Equal(t, "foreground", v.Kind)
	assert.Equal(t, modes.WorkspaceWrite, v.Sandbox.Mode)

	// The grant was for that call only: the session is still read-only.
	m, _ := sessions.SessionMode("s1")
	assert.Equal(t, modes.ReadOnly, m)
	r = b.Call(context.Background(), c, args(t, map[string]any{"command": "echo again > out2.txt", "description": "Write again"}))
	assert.Contains(t, r.Text, "[sandbox: file access denied under read-only mode]")
	assert.NoFileExists(t, filepath.Join(ws, "out2.txt"))
}

func TestAbortAfterGrantSpawnsNothing(t *testing.T) {
	e, ws := newExecutor(t, modes.ReadOnly)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ap := &countingApprover{outcome: AllowedOnce, before: cancel}
	b := newBash(t, Options{Executor: e, Approver: ap})
	marker := filepath.Join(ws, "spawned")
	r := b.Call(ctx, call.Context{Agent: &call.Agent{Session: "s", Workspace: ws}}, args(t, map[string]any{
		"command": "touch " + marker, "description": "Touch a marker", "sandbox_permissions": "workspace-write", "justification": "j"}))
	assert.True(t, r.IsError)
	assert.Equal(t, "Error: tool call aborted", r.Text)
	assert.NoFileExists(t, marker)
}

func TestForegroundTimeoutTrapExitsZero(t *testing.T) {
	// The trap must run and bash exit within the grace: a loaded machine
	// once took longer than 300 ms, and the SIGKILL then came first.
	e, _ := newExecutorGrace(t, modes.WorkspaceWrite, 5*time.Second)
	b := newBash(t, Options{Executor: e})
	// The timeout runs from the spawn, inside the executor: scaled, so that
	// bash has installed its trap when it fires.
	timeoutMs := testtime.Ms(300)
	r := b.Call(context.Background(), call.Context{}, args(t, map[string]any{
		"command": "trap 'echo bye; exit 0' TERM; sleep 30 & wait", "description": "Sleep then trap", "timeoutMs": timeoutMs}))
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "bye\n[timed out after "+formatMs(timeoutMs)+"ms]", r.Text)
}

func TestForegroundErrorsAndEnv(t *testing.T) {
	e, ws := newExecutor(t, modes.WorkspaceWrite)
	b := newBash(t, Options{Executor: e, Env: func(ctx context.Context, c call.Context, bg bool) (map[string]string, error) {
		if c.Agent == nil {
			return map[string]string{"DSH_SHELL": "1"}, nil
		}
		return map[string]string{"DSH_SHELL": "1", "DSH_SESSION_ID": c.Agent.Session}, nil
	}})
	c := call.Context{Agent: &call.Agent{Session: "sess-42", Workspace: ws}}
	r := b.Call(context.Background(), c, args(t, map[string]any{"command": "echo $DSH_SESSION_ID $DSH_SHELL; pwd", "description": "Show env",
		"env": map[string]string{"DSH_SESSION_ID": "forged"}}))
	require.False(t, r.IsError, r.Text)
	wsC, _ := filepath.EvalSymlinks(ws)
	assert.Equal(t, "sess-42 1\n"+wsC, r.Text)

	r = b.Call(context.Background(), c, args(t, map[string]any{"command": "true", "description": "Bad workdir", "workdir": "missing"}))
	assert.True(t, r.IsError)
	assert.True(t, strings.HasPrefix(r.Text, "Error: invalid request: workdir"), r.Text)

	// The abort comes once the command runs (it created its marker), not
	// at a time that a slow machine could reach before the spawn.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := filepath.Join(ws, "started")
	go func() {
		deadline := time.Now().Add(testtime.Scale(30 * time.Second))
		for time.Now().Before(deadline) {
			if _, err := os.Stat(started); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	r = b.Call(ctx, c, args(t, map[string]any{"command": "touch started; sleep 30", "description": "Sleep"}))
	assert.True(t, r.IsError)
	assert.Equal(t, "Error: tool call aborted", r.Text)
	assert.FileExists(t, started, "the abort came before the command ran")
}

func TestPolicyContext(t *testing.T) {
	e, ws := newExecutor(t, modes.WorkspaceWrite)
	sessions := &SessionModes{}
	b := newBash(t, Options{Executor: e, Sessions: sessions})
	c := call.Context{Agent: &call.Agent{Session: "s1", Workspace: ws}}
	assert.Contains(t, b.PolicyContext(c), "workspace-write mode (workspace: "+ws+")")
	require.NoError(t, sessions.SetSessionMode("s1", modes.ReadOnly))
	assert.Contains(t, b.PolicyContext(c), "read-only mode")
	assert.Contains(t, b.PolicyContext(call.Context{}), "workspace-write mode", "no agent: no session override")
}

func TestRegistryEnvReachesTheChild(t *testing.T) {
	e, ws := newExecutor(t, modes.WorkspaceWrite)
	reg, err := envreg.New(envreg.Options{Home: "/opt/dsh-home"})
	require.NoError(t, err)
	dispose, err := reg.Register(envreg.SessionPersistence(func(x envreg.Execution) (string, bool) {
		return "/var/lib/dsh/sessions/" + x.Agent.Session + ".jsonl", true
	}))
	require.NoError(t, err)
	defer dispose()
	b := newBash(t, Options{Executor: e, Env: RegistryEnv(reg)})
	r := b.Call(context.Background(), call.Context{Agent: &call.Agent{Session: "s9", Workspace: ws}},
		args(t, map[string]any{"command": "env | grep ^DSH_ | sort", "description": "Show managed env"}))
	require.False(t, r.IsError, r.Text)
	assert.Equal(t, "DSH_HOME=/opt/dsh-home\nDSH_SESSION_ID=s9\nDSH_SESSION_JSONL=/var/lib/dsh/sessions/s9.jsonl\nDSH_SHELL=1", r.Text)

	// A contributor error refuses the call.
	_, err = reg.Register(envreg.Contributor{Name: "broken", Variables: map[string]envreg.Variable{"DSH_BROKEN": {Description: "d"}},
		Resolve: func(envreg.Execution) (map[string]any, error) { return map[string]any{"DSH_BROKEN": 5}, nil }})
	require.NoError(t, err)
	r = b.Call(context.Background(), call.Context{}, args(t, map[string]any{"command": "true", "description": "d"}))
	assert.Equal(t, `Error: bash env contributor "broken" returned a non-string value for "DSH_BROKEN"`, r.Text)
}

func sandboxRequest(command string) executor.Request { return executor.Request{Command: command} }

// TestApproverIgnoringAbortCannotHoldTheCall: an Approver that never looks at
// ctx must not block Call past the abort, and its late answer is dropped.
func TestApproverIgnoringAbortCannotHoldTheCall(t *testing.T) {
	e, ws := newExecutor(t, modes.ReadOnly)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	entered, release := make(chan struct{}), make(chan struct{})
	answered := make(chan struct{})
	ap := ApproverFunc(func(context.Context, ApprovalRequest) ApprovalOutcome {
		close(entered)
		<-release // ignores ctx
		defer close(answered)
		return AllowedOnce
	})
	b := newBash(t, Options{Executor: e, Approver: ap})
	marker := filepath.Join(ws, "spawned")
	go func() { <-entered; cancel() }()
	done := make(chan call.Result, 1)
	go func() {
		done <- b.Call(ctx, call.Context{Agent: &call.Agent{Session: "s", Workspace: ws}}, args(t, map[string]any{
			"command": "touch " + marker, "description": "Touch a marker", "sandbox_permissions": "workspace-write", "justification": "j"}))
	}()
	var r call.Result
	select {
	case r = <-done:
	case <-time.After(testtime.Scale(30 * time.Second)):
		close(release)
		t.Fatal("Call still waits for an Approver that ignores the abort")
	}
	assert.True(t, r.IsError)
	assert.Equal(t, "Error: tool call aborted", r.Text)
	close(release)
	<-answered
	assert.NoFileExists(t, marker)
}

// TestEnvHookIgnoringAbortCannotHoldTheCall: the same for the managed-env
// hook (a contributor that blocks).
func TestEnvHookIgnoringAbortCannotHoldTheCall(t *testing.T) {
	e, ws := newExecutor(t, modes.WorkspaceWrite)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	entered, release := make(chan struct{}), make(chan struct{})
	b := newBash(t, Options{Executor: e, Env: func(context.Context, call.Context, bool) (map[string]string, error) {
		close(entered)
		<-release // ignores ctx
		return nil, nil
	}})
	t.Cleanup(func() { close(release) })
	marker := filepath.Join(ws, "spawned")
	go func() { <-entered; cancel() }()
	done := make(chan call.Result, 1)
	go func() {
		done <- b.Call(ctx, call.Context{}, args(t, map[string]any{"command": "touch " + marker, "description": "Touch a marker"}))
	}()
	select {
	case r := <-done:
		assert.True(t, r.IsError)
		assert.Equal(t, "Error: tool call aborted", r.Text)
	case <-time.After(testtime.Scale(30 * time.Second)):
		t.Fatal("Call still waits for an Env hook that ignores the abort")
	}
	assert.NoFileExists(t, marker)
}

func TestPolicyContextAllowlist(t *testing.T) {
	ws := t.TempDir()
	e, err := executor.New(executor.Config{Mode: modes.WorkspaceWrite, Workspace: ws, SpillDir: t.TempDir(),
		Allowlist: &modes.Allowlist{Domains: []string{"registry.npmjs.org"}, Hosts: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:5432")}}})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	b := newBash(t, Options{Executor: e})
	assert.Contains(t, b.PolicyContext(call.Context{}),
		"the network is off except through a proxy (HTTP_PROXY, HTTPS_PROXY and ALL_PROXY are set) to registry.npmjs.org; the local service 127.0.0.1:5432.")
}

// TestApprovalRequestDenials: an escalation carries the denials of the
// session's previous call only when that call was the same command and was
// denied, and only once.
func TestApprovalRequestDenials(t *testing.T) {
	e, ws := newExecutor(t, modes.ReadOnly)
	ap := &countingApprover{outcome: Rejected}
	b := newBash(t, Options{Executor: e, Approver: ap})
	s1 := call.Context{Agent: &call.Agent{Session: "s1", Workspace: ws}, ID: "c1"}
	s2 := call.Context{Agent: &call.Agent{Session: "s2", Workspace: ws}, ID: "c2"}
	run := func(c call.Context, cmd string) {
		r := b.Call(context.Background(), c, args(t, map[string]any{"command": cmd, "description": "Run a command"}))
		require.False(t, r.IsError, r.Text)
	}
	escalate := func(c call.Context, cmd string) []sandbox.Denial {
		ap.last = ApprovalRequest{}
		r := b.Call(context.Background(), c, args(t, map[string]any{"command": cmd, "description": "Run a command",
			"sandbox_permissions": "workspace-write", "justification": "It must write its file."}))
		require.True(t, r.IsError, r.Text)
		assert.Equal(t, `Error: the user rejected escalating this command to "workspace-write"`, r.Text)
		assert.Equal(t, cmd, ap.last.Command)
		return ap.last.Denials
	}
	denied := "echo x > f.txt"

	assert.Empty(t, escalate(s1, denied), "no call before")
	run(s1, denied)
	assert.Empty(t, escalate(s2, denied), "another session's denial")
	assert.Empty(t, escalate(s1, "echo y > g.txt"), "another command")
	run(s1, denied)
	ds := escalate(s1, denied)
	require.Len(t, ds, 1)
	assert.Equal(t, "write", ds[0].Op)
	assert.Equal(t, filepath.Join(ws, "f.txt"), ds[0].Path)
	assert.Empty(t, escalate(s1, denied), "taken once")
	run(s1, denied)
	run(s1, "true")
	assert.Empty(t, escalate(s1, denied), "an allowed call in between")
	assert.NoFileExists(t, filepath.Join(ws, "f.txt"))
}

func TestRecentDenialsBounded(t *testing.T) {
	var r recentDenials
	f := sandbox.Facts{Denied: true, Denials: []sandbox.Denial{{Op: "write", Path: "/x"}, {Op: sandbox.OpLimit, Address: "pids"}}}
	for i := range maxRecentSessions + 10 {
		r.record(fmt.Sprint("s", i), "cmd", f)
	}
	assert.Len(t, r.calls, maxRecentSessions)
	assert.Len(t, r.order, maxRecentSessions)
	assert.Nil(t, r.take("s0", "cmd"), "the oldest went first")
	assert.Equal(t, []sandbox.Denial{{Op: "write", Path: "/x"}}, r.take(fmt.Sprint("s", maxRecentSessions+9), "cmd"), "limits left out")
	assert.Len(t, r.calls, maxRecentSessions-1)
}

// TestNetworkOnlyDenialMarker: a command denied only the network gets the
// network marker, not the file one (a listener on loopback proves nothing
// connected); one denied both gets both, file first.
func TestNetworkOnlyDenialMarker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := ln.(*net.TCPListener)
	defer l.Close()
	e, ws := newExecutor(t, modes.WorkspaceWrite)
	b := newBash(t, Options{Executor: e, Approver: &countingApprover{outcome: Rejected}})
	c := call.Context{Agent: &call.Agent{Session: "s1", Workspace: ws}, ID: "c1"}
	host, port, err := net.SplitHostPort(l.Addr().String())
	require.NoError(t, err)
	connect := "exec 3<>/dev/tcp/" + host + "/" + port

	r := b.Call(context.Background(), c, args(t, map[string]any{"command": connect, "description": "Connect to the listener"}))
	require.False(t, r.IsError, r.Text)
	allowHost := SuggestionMarker([]string{"--allow-host localhost:" + port})
	assert.Contains(t, r.Text, "\n[sandbox: network access denied under workspace-write mode]\n"+allowHost+"\n"+EscalationHint+"\n[exit code: 1]")
	assert.NotContains(t, r.Text, "file access denied")

	outside := outsideDir(t)
	r = b.Call(context.Background(), c, args(t, map[string]any{"command": "echo x > " + outside + "/f; " + connect, "description": "Write and connect"}))
	require.False(t, r.IsError, r.Text)
	both := SuggestionMarker([]string{"--allow-write " + outside, "--allow-host localhost:" + port})
	assert.Contains(t, r.Text, "\n[sandbox: file access denied under workspace-write mode]\n[sandbox: network access denied under workspace-write mode]\n"+both+"\n"+EscalationHint+"\n[exit code: 1]")
	assert.NoFileExists(t, filepath.Join(outside, "f"))
	// A connection made would be waiting in the backlog: Accept returns it
	// at once, else times out.
	require.NoError(t, l.SetDeadline(time.Now().Add(100*time.Millisecond)))
	if conn, err := l.Accept(); err == nil {
		conn.Close()
		t.Fatal("the sandboxed command connected to the host's listener")
	}
}
