//lint:file-ignore SA1019 the tests drive the roots and logging features the server uses (see server.go, roots.go).

package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/internal/printable"
	"github.com/dsh-sandbox/dsh-sandbox/internal/testhost"
	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/tasks"
	"github.com/dsh-sandbox/dsh-sandbox/tool"
)

const (
	denied  = "[sandbox: file access denied under workspace-write mode]"
	justify = "The user asked for this file outside the workspace."
)

// outsideDir is a directory outside every writable root (not under /tmp,
// /dev/shm or $TMPDIR), writable by DAC.
func outsideDir(t *testing.T) string {
	t.Helper()
	parent := "/var/tmp"
	if os.Geteuid() == 0 {
		parent = "/var/lib"
	}
	d, err := os.MkdirTemp(parent, "dsh-mcp-out-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// newServer is a server in workspace-write over a fresh workspace.
func newServer(t *testing.T, o Options) (*Server, string) {
	t.Helper()
	testhost.RequireConfined(t)
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	if o.Config.Workspace == "" {
		o.Config.Workspace = ws
	}
	if !o.Config.Mode.Valid() || o.Config.Mode == modes.ReadOnly {
		o.Config.Mode = modes.WorkspaceWrite
	}
	o.Config.SpillDir = t.TempDir()
	o.Config.KillGrace = testtime.Scale(500 * time.Millisecond)
	s, err := New(o)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testtime.Scale(20*time.Second))
		defer cancel()
		assert.NoError(t, s.Close(ctx))
	})
	return s, o.Config.Workspace
}

// client is one MCP client session of the server, with what it received.
type client struct {
	cl *mcp.Client
	cs *mcp.ClientSession

	mu      sync.Mutex
	logs    []string
	elicits []string
	logged  chan struct{}
}

// connect opens a client session over the in-memory transport. answer is
// the client's elicitation answer ("" for a client without the
// elicitation capability).
func connect(t *testing.T, s *Server, answer string, roots ...*mcp.Root) *client {
	t.Helper()
	c := &client{logged: make(chan struct{}, 16)}
	opts := &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			c.mu.Lock()
			c.logs = append(c.logs, fmt.Sprintf("%s %s %v", r.Params.Level, r.Params.Logger, r.Params.Data))
			c.mu.Unlock()
			c.logged <- struct{}{}
		},
	}
	if answer != "" {
		opts.ElicitationHandler = func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			c.mu.Lock()
			c.elicits = append(c.elicits, r.Params.Message)
			c.mu.Unlock()
			// "accept:VALUE" accepts with the form's one field set.
			action, value, _ := strings.Cut(answer, ":")
			if value != "" {
				return &mcp.ElicitResult{Action: action, Content: map[string]any{"allow": value}}, nil
			}
			// Accepted without filling the form, as a client that shows
			// no fields does.
			return &mcp.ElicitResult{Action: answer, Content: map[string]any{}}, nil
		}
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts)
	if len(roots) > 0 {
		cl.AddRoots(roots...)
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	_, err := s.MCP().Connect(ctx, st, nil)
	require.NoError(t, err)
	cs, err := cl.Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	require.NoError(t, cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}))
	c.cl, c.cs = cl, cs
	return c
}

// call calls a tool and returns its texts and isError.
func (c *client) call(t *testing.T, name string, args any) ([]string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testtime.Scale(60*time.Second))
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	var texts []string
	for _, content := range res.Content {
		tc, ok := content.(*mcp.TextContent)
		require.True(t, ok, "content %T", content)
		texts = append(texts, tc.Text)
	}
	require.NotEmpty(t, texts)
	return texts, res.IsError
}

// text calls a tool and returns its result's first text (the tool's own).
func (c *client) text(t *testing.T, name string, args any) (string, bool) {
	t.Helper()
	texts, isErr := c.call(t, name, args)
	return texts[0], isErr
}

func bashArgs(command string, kv ...any) map[string]any {
	a := map[string]any{"command": command, "description": "Run a test command"}
	for i := 0; i+1 < len(kv); i += 2 {
		a[kv[i].(string)] = kv[i+1]
	}
	return a
}

func TestToolsList(t *testing.T) {
	for _, tc := range []struct {
		name         string
		noBackground bool
		want         []string
	}{
		{"background", false, []string{tool.Name, tasks.ToolTaskKill, tasks.ToolTaskList, tasks.ToolTaskOutput}},
		{"no background", true, []string{tool.Name}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newServer(t, Options{DisableBackground: tc.noBackground})
			c := connect(t, s, "")
			res, err := c.cs.ListTools(context.Background(), nil)
			require.NoError(t, err)
			want := map[string]call.Tool{tool.Name: s.bash}
			for _, tt := range tasks.TaskTools(s.rt) {
				want[tt.Name()] = tt
			}
			var names []string
			for _, got := range res.Tools {
				names = append(names, got.Name)
				w := want[got.Name]
				require.NotNil(t, w, got.Name)
				assert.Equal(t, w.Description(), got.Description, got.Name)
				schema, err := json.Marshal(got.InputSchema)
				require.NoError(t, err)
				assert.JSONEq(t, string(w.Schema()), string(schema), got.Name)
			}
			assert.ElementsMatch(t, tc.want, names)
			bashSchema, err := json.Marshal(res.Tools[0].InputSchema)
			require.NoError(t, err)
			assert.Equal(t, !tc.noBackground, strings.Contains(string(bashSchema), `"run_in_background"`))
			assert.Contains(t, string(bashSchema), `"sandbox_permissions"`, "the executor confines: escalation is offered")
		})
	}
}

func TestInstructions(t *testing.T) {
	s, ws := newServer(t, Options{})
	c := connect(t, s, "")
	got := c.cs.InitializeResult().Instructions
	assert.Contains(t, got, tool.SystemPromptSection().Text)
	assert.Contains(t, got, "workspace-write mode (workspace: "+ws+")")
	assert.LessOrEqual(t, c.cs.InitializeResult().ProtocolVersion, maxProtocolVersion)
}

func TestBashCall(t *testing.T) {
	s, ws := newServer(t, Options{})
	c := connect(t, s, "")
	out := outsideDir(t)
	for _, tc := range []struct {
		name    string
		args    any
		want    string // the whole text, or with contains a part of it
		contain bool
		isError bool
		absent  string // a file that must not exist afterwards
	}{
		{name: "run", args: bashArgs("echo hi; pwd"), want: "hi\n" + ws},
		{name: "non-zero exit", args: bashArgs("echo oops >&2; exit 3"), want: "[stderr]\noops\n[exit code: 3]"},
		{name: "empty command", args: bashArgs(""), want: "Error: invalid command: expected a non-empty string", isError: true},
		{name: "no command", args: map[string]any{"description": "Run nothing at all"}, want: "Error: invalid command: expected a non-empty string", isError: true},
		{name: "no arguments", args: nil, want: "Error: invalid command: expected a non-empty string", isError: true},
		{name: "justification alone", args: bashArgs("true", "justification", justify),
			want: "Error: invalid escalation: justification is only valid together with sandbox_permissions", isError: true},
		{name: "denied write", args: bashArgs("echo x > " + out + "/denied"), want: denied, contain: true, absent: filepath.Join(out, "denied")},
		{name: "workspace write", args: bashArgs("echo x > made && cat made"), want: "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, isErr := c.text(t, tool.Name, tc.args)
			if tc.contain {
				assert.Contains(t, got, tc.want)
			} else {
				assert.Equal(t, tc.want, got)
			}
			assert.Equal(t, tc.isError, isErr, got)
			if tc.absent != "" {
				assert.NoFileExists(t, tc.absent, "the sandbox let the write through")
			}
		})
	}
	b, err := os.ReadFile(filepath.Join(ws, "made"))
	require.NoError(t, err)
	assert.Equal(t, "x\n", string(b))

	// The sandbox facts ride in _meta: here, the file the command made.
	ctx, cancel := context.WithTimeout(context.Background(), testtime.Scale(60*time.Second))
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.Name, Arguments: bashArgs("echo y > made2")})
	require.NoError(t, err)
	raw, err := json.Marshal(res.Meta[MetaSandbox])
	require.NoError(t, err)
	var facts sandbox.Facts
	require.NoError(t, json.Unmarshal(raw, &facts), "%s", raw)
	assert.Equal(t, []sandbox.Change{{Op: sandbox.ChangeCreated, Path: filepath.Join(ws, "made2"), Type: "file", Size: 2, Mode: "0644", Root: ws}}, facts.Changes)
	assert.Equal(t, "workspace-write", facts.Mode.String())
}

func TestEscalation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  string // "" : the client has no elicitation capability
		want    string
		written bool
	}{
		{"accepted", "accept", "(no output)", true},
		{"declined", "decline", `Error: the user rejected escalating this command to "danger-full-access"`, false},
		{"cancelled", "cancel", `Error: approval for escalating to "danger-full-access" was cancelled`, false},
		{"no elicitation", "", `Error: sandbox escalation to "danger-full-access" requires approval, but no approval channel is available`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ws := newServer(t, Options{})
			c := connect(t, s, tc.answer)
			out := outsideDir(t)
			target := filepath.Join(out, "escalated")
			command := "echo x > " + target
			first, isErr := c.text(t, tool.Name, bashArgs(command))
			require.False(t, isErr, first)
			require.Contains(t, first, denied)
			require.NoFileExists(t, target)

			got, isErr := c.text(t, tool.Name, bashArgs(command, "sandbox_permissions", "danger-full-access", "justification", justify))
			assert.Equal(t, tc.want, got)
			assert.Equal(t, !tc.written, isErr)
			if tc.written {
				b, err := os.ReadFile(target)
				require.NoError(t, err, "the approved command did not write outside the workspace")
				assert.Equal(t, "x\n", string(b))
			} else {
				assert.NoFileExists(t, target, "an escalation that was not approved ran")
			}
			c.mu.Lock()
			elicits := c.elicits
			c.mu.Unlock()
			if tc.answer == "" {
				assert.Empty(t, elicits)
				return
			}
			require.Len(t, elicits, 1)
			for _, want := range []string{
				"Command: " + command + "\n",
				"Workdir: " + ws + "\n",
				"Mode: workspace-write -> danger-full-access\n",
				"Justification: " + justify + "\n",
				// What was denied, and the one flag that would allow it.
				"Last run: denied write " + target + " (workspace-write mode); allow with --allow-write " + filepath.Dir(target) + "\n",
			} {
				assert.Contains(t, elicits[0], want)
			}

			// The grant was for that one call: the session is still confined.
			again, _ := c.text(t, tool.Name, bashArgs("echo y > "+filepath.Join(out, "again")))
			assert.Contains(t, again, denied)
			assert.NoFileExists(t, filepath.Join(out, "again"))
		})
	}
}

// TestEscalationJustThese: where the last run's denials suggest narrow
// grants, the elicitation offers "just these" next to the mode; choosing
// them runs the call in its own mode with those directories writable.
func TestEscalationJustThese(t *testing.T) {
	for _, tc := range []struct {
		answer, mode string
	}{
		{"accept:just-these", "workspace-write"},
		{"accept:mode", "danger-full-access"},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			s, _ := newServer(t, Options{})
			c := connect(t, s, tc.answer)
			out := outsideDir(t)
			command := "echo x > " + filepath.Join(out, "f")
			_, isErr := c.text(t, tool.Name, bashArgs(command))
			require.False(t, isErr)
			ctx := context.Background()
			res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.Name,
				Arguments: bashArgs(command, "sandbox_permissions", "danger-full-access", "justification", justify)})
			require.NoError(t, err)
			require.False(t, res.IsError)
			assert.FileExists(t, filepath.Join(out, "f"))
			b, err := json.Marshal(res.Meta[MetaSandbox])
			require.NoError(t, err)
			var facts sandbox.Facts
			require.NoError(t, json.Unmarshal(b, &facts))
			assert.Equal(t, tc.mode, facts.Mode.String())
			c.mu.Lock()
			defer c.mu.Unlock()
			require.Len(t, c.elicits, 1)
			assert.Contains(t, c.elicits[0], "Narrower: allow just --allow-write "+out+" for this call, keeping workspace-write mode.\n")
		})
	}
}

func TestApprovalMessageEscapes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"rm -rf /tmp/x\necho done\tok", "rm -rf /tmp/x\necho done\tok"},
		{"echo safe\r\x1b[2Krm -rf ~", `echo safe\r\x1b[2Krm -rf ~`},
		{"echo \u202egnp.exe", `echo \u202egnp.exe`},
		{"echo \u009b2J", `echo \u009b2J`},
	} {
		assert.Equal(t, tc.want, printable.Text(tc.in))
	}
}

// waitTask waits until task id has ended.
func waitTask(t *testing.T, s *Server, id string) tasks.Info {
	t.Helper()
	deadline := time.Now().Add(testtime.Scale(30 * time.Second))
	for time.Now().Before(deadline) {
		if info, ok := s.Tasks().Get(id); ok && info.Status.Ended() {
			return info
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("task %s did not end", id)
	return tasks.Info{}
}

func TestBackgroundTasks(t *testing.T) {
	s, _ := newServer(t, Options{})
	c := connect(t, s, "")

	got, isErr := c.text(t, tool.Name, bashArgs("echo from-bg; echo err-bg >&2", "run_in_background", true))
	require.False(t, isErr, got)
	require.Equal(t, "started background task bash-1", got)
	waitTask(t, s, "bash-1")
	select {
	case <-c.logged:
	case <-time.After(testtime.Scale(10 * time.Second)):
		t.Fatal("no completion notification")
	}
	notice := "background task bash-1 (bash: Run a test command) finished [status: completed, exit code: 0]. Read its output with task_output."
	c.mu.Lock()
	assert.Equal(t, []string{"notice " + LoggerName + " " + notice}, c.logs)
	c.mu.Unlock()

	// The notice also comes with the session's next result, after its text.
	texts, isErr := c.call(t, tasks.ToolTaskList, map[string]any{})
	require.False(t, isErr)
	assert.Equal(t, []string{"bash-1 [bash] completed \u2014 Run a test command", notice}, texts)
	texts, _ = c.call(t, tasks.ToolTaskList, map[string]any{})
	assert.Len(t, texts, 1, "a notice is delivered once")

	got, _ = c.text(t, tasks.ToolTaskOutput, map[string]any{"task_id": "bash-1"})
	assert.Equal(t, "from-bg\n[stderr]\nerr-bg\n[status: completed, exit code: 0]", got)
	got, _ = c.text(t, tasks.ToolTaskOutput, map[string]any{"task_id": "bash-1"})
	assert.Equal(t, "(no new output)\n[status: completed, exit code: 0]", got)

	got, _ = c.text(t, tool.Name, bashArgs("echo started; exec sleep 60", "run_in_background", true))
	require.Equal(t, "started background task bash-2", got)
	got, _ = c.text(t, tasks.ToolTaskOutput, map[string]any{"task_id": "bash-2", "wait": true, "timeout_ms": 300})
	assert.Equal(t, "started\n[status: running]", got)
	got, _ = c.text(t, tasks.ToolTaskList, map[string]any{})
	assert.Equal(t, "bash-1 [bash] completed \u2014 Run a test command\nbash-2 [bash] running \u2014 Run a test command", got)
	got, isErr = c.text(t, tasks.ToolTaskKill, map[string]any{"task_id": "bash-2", "reason": "test"})
	assert.False(t, isErr)
	assert.Equal(t, "requested cancellation of task bash-2", got)
	got, _ = c.text(t, tasks.ToolTaskOutput, map[string]any{"task_id": "bash-2", "wait": true})
	assert.Equal(t, "(no new output)\n[status: killed, signal: SIGTERM]", got)
	got, _ = c.text(t, tasks.ToolTaskKill, map[string]any{"task_id": "bash-2"})
	assert.Equal(t, "task bash-2 had already finished [status: killed, signal: SIGTERM]", got)

	got, isErr = c.text(t, tasks.ToolTaskOutput, map[string]any{"task_id": "bash-9"})
	assert.True(t, isErr)
	assert.Equal(t, "Error: unknown task bash-9", got)
	got, isErr = c.text(t, tasks.ToolTaskOutput, map[string]any{"task_id": ""})
	assert.True(t, isErr)
	assert.Equal(t, `Error: invalid task_id: expected a non-empty string, got ""`, got)
	c.mu.Lock()
	assert.Len(t, c.logs, 1, "no notice for a task whose end the owner consumed (killed, waited)")
	c.mu.Unlock()
}

func TestTaskOwnership(t *testing.T) {
	s, _ := newServer(t, Options{})
	a := connect(t, s, "")
	b := connect(t, s, "")
	got, _ := a.text(t, tool.Name, bashArgs("exec sleep 60", "run_in_background", true))
	require.Equal(t, "started background task bash-1", got)
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{tasks.ToolTaskOutput, map[string]any{"task_id": "bash-1"}},
		{tasks.ToolTaskKill, map[string]any{"task_id": "bash-1"}},
	} {
		got, isErr := b.text(t, tc.tool, tc.args)
		assert.True(t, isErr, tc.tool)
		assert.Equal(t, "Error: task bash-1 belongs to another session", got, tc.tool)
	}
	got, _ = b.text(t, tasks.ToolTaskList, map[string]any{})
	assert.Equal(t, "(no background tasks)", got)
	got, _ = a.text(t, tasks.ToolTaskList, map[string]any{})
	assert.Equal(t, "bash-1 [bash] running \u2014 Run a test command", got)
	info, _ := s.Tasks().Get("bash-1")
	assert.Equal(t, tasks.StatusRunning, info.Status, "the other session's kill did nothing")

	// The sessions' agent ids are distinct and not the transport's.
	ida, idb := sessionIDs(t, s)
	assert.NotEqual(t, ida, idb)
	got, _ = a.text(t, tool.Name, bashArgs("echo $DSH_SESSION_ID"))
	assert.Contains(t, []string{ida, idb}, got)

	// A session that ends takes its live tasks with it.
	require.NoError(t, a.cs.Close())
	info = waitTask(t, s, "bash-1")
	assert.Equal(t, tasks.StatusKilled, info.Status)
}

func sessionIDs(t *testing.T, s *Server) (string, string) {
	t.Helper()
	var ids []string
	for ss := range s.MCP().Sessions() {
		id := s.SessionID(ss)
		require.True(t, strings.HasPrefix(id, "mcp-"), id)
		ids = append(ids, id)
	}
	require.Len(t, ids, 2)
	return ids[0], ids[1]
}

func TestCloseKillsTasks(t *testing.T) {
	s, _ := newServer(t, Options{})
	c := connect(t, s, "")
	arg := fmt.Sprintf("%d.%03d", 100+time.Now().UnixNano()%800, time.Now().Nanosecond()%1000)
	for range 2 {
		got, _ := c.text(t, tool.Name, bashArgs("sleep "+arg+"; echo never", "run_in_background", true))
		require.True(t, strings.HasPrefix(got, "started background task "), got)
	}
	deadline := time.Now().Add(testtime.Scale(10 * time.Second))
	for testhost.CountProcs(t, "sleep", arg) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, 2, testhost.CountProcs(t, "sleep", arg), "the background commands did not start")
	ctx, cancel := context.WithTimeout(context.Background(), testtime.Scale(20*time.Second))
	defer cancel()
	require.NoError(t, s.Close(ctx))
	for _, info := range s.Tasks().Snapshot() {
		assert.True(t, info.Status.Ended(), "%s: %s", info.ID, info.Status)
	}
	assert.Equal(t, 0, testhost.CountProcs(t, "sleep", arg), "a task tree outlived Close")
}

func TestRootsWorkspace(t *testing.T) {
	s, ws := newServer(t, Options{Roots: true})
	dirA, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	dirB, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)

	c := connect(t, s, "", &mcp.Root{URI: "https://example.com/repo"}, &mcp.Root{URI: "file://" + dirA, Name: "a"})
	got, _ := c.text(t, tool.Name, bashArgs("pwd; echo x > in-root"))
	assert.Equal(t, dirA, got)
	assert.FileExists(t, filepath.Join(dirA, "in-root"), "the root is the session's writable workspace")

	// roots/list_changed: the next call reads the roots again.
	c.cl.RemoveRoots("file://" + dirA)
	c.cl.AddRoots(&mcp.Root{URI: "file://" + dirB})
	deadline := time.Now().Add(testtime.Scale(10 * time.Second))
	for got != dirB && time.Now().Before(deadline) {
		got, _ = c.text(t, tool.Name, bashArgs("pwd"))
	}
	assert.Equal(t, dirB, got)

	// No roots capability: the executor's workspace.
	plain := connect(t, s, "")
	got, _ = plain.text(t, tool.Name, bashArgs("pwd"))
	assert.Equal(t, ws, got)

	// A file root the server cannot use is an error, not another directory.
	bad := connect(t, s, "", &mcp.Root{URI: "file://host.example/share"})
	got, isErr := bad.text(t, tool.Name, bashArgs("pwd"))
	assert.True(t, isErr)
	assert.Equal(t, `Error: MCP root "file://host.example/share": not a local file URI`, got)
}

func TestFirstFileRoot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		roots []*mcp.Root
		want  string
		err   string
	}{
		{"none", nil, "", ""},
		{"not file", []*mcp.Root{{URI: "https://x/y"}}, "", ""},
		{"first file wins", []*mcp.Root{{URI: "https://x"}, {URI: "file:///a/b/"}, {URI: "file:///c"}}, "/a/b", ""},
		{"escaped", []*mcp.Root{{URI: "file:///a%20b/c"}}, "/a b/c", ""},
		{"localhost", []*mcp.Root{{URI: "file://localhost/srv"}}, "/srv", ""},
		{"remote host", []*mcp.Root{{URI: "file://h/srv"}}, "", "not a local file URI"},
		{"relative", []*mcp.Root{{URI: "file:rel/dir"}}, "", "not an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := firstFileRoot(tc.roots)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

func TestHTTPHandler(t *testing.T) {
	s, _ := newServer(t, Options{})
	_, err := s.HTTPHandler("short")
	require.Error(t, err)
	const token = "0123456789abcdef0123"
	h, err := s.HTTPHandler(token)
	require.NoError(t, err)
	hs := httptest.NewServer(h)
	defer hs.Close()

	for _, tc := range []struct {
		name, header string
	}{{"no token", ""}, {"wrong token", "Bearer 0123456789abcdef0124"}, {"not bearer", token}} {
		req, err := http.NewRequest("POST", hs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, tc.name)
	}

	cl := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: hs.URL, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
	}, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool.Name, Arguments: bashArgs("echo over-http")})
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	assert.Equal(t, "over-http", res.Content[0].(*mcp.TextContent).Text)
}

// A call the client cancels (notifications/cancelled) kills its command.
func TestCancelledCall(t *testing.T) {
	s, _ := newServer(t, Options{})
	c := connect(t, s, "")
	arg := fmt.Sprintf("%d.%06d", 300+time.Now().UnixNano()%600, time.Now().Nanosecond()/1000)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.Name, Arguments: bashArgs("sleep " + arg)})
		errc <- err
	}()
	deadline := time.Now().Add(testtime.Scale(10 * time.Second))
	for testhost.CountProcs(t, "sleep", arg) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, 1, testhost.CountProcs(t, "sleep", arg), "the command did not start")
	cancel()
	require.Error(t, <-errc)
	deadline = time.Now().Add(testtime.Scale(10 * time.Second))
	for testhost.CountProcs(t, "sleep", arg) != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	assert.Equal(t, 0, testhost.CountProcs(t, "sleep", arg), "the cancelled call's command still runs")
}

// TestProgressNotifications: a call with a progress token gets
// notifications/progress while its command runs, with the token, an
// increasing progress and the output's last line; a call without one gets
// none.
func TestProgressNotifications(t *testing.T) {
	s, _ := newServer(t, Options{ProgressInterval: testtime.Scale(100 * time.Millisecond)})
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	cl := mcp.NewClient(&mcp.Implementation{Name: "progress-client", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, r.Params)
			mu.Unlock()
		},
	})
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	_, err := s.MCP().Connect(ctx, st, nil)
	require.NoError(t, err)
	cs, err := cl.Connect(ctx, ct, nil)
	require.NoError(t, err)
	defer cs.Close()

	cmd := "echo one; sleep " + sleepSecs(1) + "; printf 'two\\x1b[31m\\n'; sleep " + sleepSecs(1)
	params := &mcp.CallToolParams{Name: tool.Name, Arguments: bashArgs(cmd)}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(ctx, params)
	require.NoError(t, err)
	require.False(t, res.IsError)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, got, "no progress notification")
	var msgs []string
	for i, p := range got {
		assert.Equal(t, "tok-1", p.ProgressToken)
		assert.Equal(t, float64(i+1), p.Progress)
		msgs = append(msgs, p.Message)
	}
	assert.Contains(t, msgs, "one")
	assert.Contains(t, msgs, `two\x1b[31m`, "the last line, escaped")

	n := len(got)
	mu.Unlock()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.Name, Arguments: bashArgs("sleep " + sleepSecs(1))})
	require.NoError(t, err)
	mu.Lock()
	assert.Len(t, got, n, "a call without a progress token gets none")
}

// sleepSecs is n seconds, scaled as the tests' deadlines are.
func sleepSecs(n float64) string {
	return strconv.FormatFloat(testtime.Scale(time.Duration(n*float64(time.Second))).Seconds(), 'f', 2, 64)
}
