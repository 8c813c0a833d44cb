//lint:file-ignore SA1019 logging (notifications/message) is how completion notices reach the session; deprecated only from protocol 2026-07-28, which this server does not negotiate.

package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/envreg"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/tasks"
	"github.com/dsh-sandbox/dsh-sandbox/tool"
)

// Name is the server's default implementation name.
const Name = "dsh-sandbox"

// LoggerName is the logger of the completion notices sent as
// notifications/message.
const LoggerName = "dsh-sandbox"

// maxProtocolVersion is the newest MCP protocol version the server
// negotiates: later ones forbid the server-initiated elicitation requests
// that escalations are asked with.
const maxProtocolVersion = "2025-11-25"

const (
	// rootsTimeout bounds a roots/list request to the client.
	rootsTimeout = 10 * time.Second
	// logTimeout bounds the sending of one completion notice.
	logTimeout = 5 * time.Second
	// disposeTimeout bounds the killing of an ended session's tasks.
	disposeTimeout = 30 * time.Second
)

// Options configure a Server.
type Options struct {
	// Config configures the server's one sandbox executor: the default
	// mode, the workspace, the writable roots, the network and the limits.
	Config executor.Config
	// Roots takes each session's workspace from the client's first file://
	// root (the client's roots capability); without roots, or with none
	// that is a file:// URI, the executor's workspace applies. When false
	// every session uses the executor's workspace.
	Roots bool
	// DisableBackground removes run_in_background from the bash tool and
	// the task tools from the server.
	DisableBackground bool
	// TaskLimit is the most running background tasks per session (not
	// positive: tasks.DefaultLimit).
	TaskLimit int
	// Env is the registry of the managed DSH_* variables; nil means a
	// registry with the built-in ones only.
	Env *envreg.Registry
	// Implementation names the server to clients; nil means Name with
	// version "devel".
	Implementation *mcp.Implementation
	// Logger receives the SDK's logs; nil discards them.
	Logger *slog.Logger
	// RequireRoots (with Roots) makes every session's workspace its
	// client's first file:// root: the executor's own workspace is not one
	// (the server started in a directory too broad to be a workspace), and
	// a call whose client gives no such root is refused with one line.
	RequireRoots bool
	// ProgressInterval is how often a tools/call with a progress token
	// gets notifications/progress while its command runs (0:
	// DefaultProgressInterval).
	ProgressInterval time.Duration
}

// Server is an MCP server exposing the sandboxed bash tool and the task
// tools. It is safe for concurrent use by many MCP sessions.
type Server struct {
	mcp      *mcp.Server
	exec     *executor.Executor
	rt       *tasks.Runtime
	bash     *tool.Bash
	sessions *tool.SessionModes
	roots    bool
	needRoot bool
	bgCancel context.CancelFunc
	progress time.Duration

	mu       sync.Mutex
	byConn   map[*mcp.ServerSession]*session
	byID     map[string]*session
	closed   bool
	watchers sync.WaitGroup
}

// session is one MCP session, as an agent session.
type session struct {
	id string
	ss *mcp.ServerSession

	mu        sync.Mutex
	calls     int
	workspace string // from the roots; "" is the executor's
	rootsRead bool   // workspace holds the roots of generation gen
	gen       int    // bumped by notifications/roots/list_changed
	notices   []string
}

// New builds the executor, the task runtime, the tools and the MCP server.
// Close releases them.
func New(o Options) (*Server, error) {
	exec, err := executor.New(o.Config)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	reg := o.Env
	if reg == nil {
		if reg, err = envreg.New(envreg.Options{}); err != nil {
			exec.Close()
			return nil, fmt.Errorf("mcpserver: %w", err)
		}
	}
	bg, bgCancel := context.WithCancel(context.Background())
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = DefaultProgressInterval
	}
	s := &Server{
		exec: exec, sessions: &tool.SessionModes{}, roots: o.Roots, needRoot: o.Roots && o.RequireRoots, bgCancel: bgCancel, progress: o.ProgressInterval,
		byConn: map[*mcp.ServerSession]*session{}, byID: map[string]*session{},
	}
	s.rt = tasks.New(tasks.Options{Limit: o.TaskLimit, Notifier: notifier{s}})
	s.bash, err = tool.New(tool.Options{
		Executor: exec, Tasks: s.rt, DisableBackground: o.DisableBackground,
		Approver: approver{s}, Sessions: s.sessions, Env: tool.RegistryEnv(reg),
		BackgroundContext: bg,
	})
	if err != nil {
		bgCancel()
		exec.Close()
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	tools := []call.Tool{s.bash}
	if !o.DisableBackground {
		tools = append(tools, tasks.TaskTools(s.rt)...)
	}

	impl := o.Implementation
	if impl == nil {
		impl = &mcp.Implementation{Name: Name, Version: "devel"}
	}
	var versions []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if v <= maxProtocolVersion { // the versions are dates: lexical order is time order
			versions = append(versions, v)
		}
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s.mcp = mcp.NewServer(impl, &mcp.ServerOptions{
		Instructions:              s.instructions(),
		Logger:                    logger,
		InitializedHandler:        func(_ context.Context, r *mcp.InitializedRequest) { s.session(r.Session) },
		RootsListChangedHandler:   s.rootsChanged,
		SupportedProtocolVersions: versions,
	})
	for _, t := range tools {
		if err := checkSchema(t); err != nil {
			s.Close(context.Background())
			return nil, err
		}
		s.mcp.AddTool(&mcp.Tool{Name: t.Name(), Description: t.Description(), InputSchema: t.Schema()}, s.handler(t))
	}
	return s, nil
}

// checkSchema makes sure the tool's schema is a JSON object schema, as the
// SDK requires of an inputSchema.
func checkSchema(t call.Tool) error {
	var s struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(t.Schema(), &s); err != nil {
		return fmt.Errorf("mcpserver: tool %s: schema: %w", t.Name(), err)
	}
	if s.Type != "object" {
		return fmt.Errorf("mcpserver: tool %s: schema type %q, want \"object\"", t.Name(), s.Type)
	}
	return nil
}

// instructions is the server's system text: the bash tool's system prompt
// section, and, when every session has the executor's workspace, the
// policy its commands run with.
func (s *Server) instructions() string {
	text := tool.SystemPromptSection().Text
	if !s.roots {
		text += "\n\n" + s.bash.PolicyContext(call.Context{})
	}
	return text
}

// MCP is the server to run over a transport (mcp.Server.Run, Connect, or
// an HTTP handler such as HTTPHandler).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Executor is the server's sandbox executor.
func (s *Server) Executor() *executor.Executor { return s.exec }

// Tasks is the server's background task runtime.
func (s *Server) Tasks() *tasks.Runtime { return s.rt }

// SessionModes holds the per-session mode overrides, keyed by SessionID.
func (s *Server) SessionModes() *tool.SessionModes { return s.sessions }

// SessionID is the agent session id the server gave an MCP session (the
// owner of its tasks, its DSH_SESSION_ID), or "" when the session has not
// initialized or made a call yet.
func (s *Server) SessionID(ss *mcp.ServerSession) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if x, ok := s.byConn[ss]; ok {
		return x.id
	}
	return ""
}

// Close kills every live background task tree and every running command,
// ends the MCP sessions and releases the executor. ctx bounds the wait for
// the tasks to end (they get SIGTERM, then SIGKILL after the grace); Close
// returns its error if it ends first, after releasing everything else.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	var conns []*mcp.ServerSession
	for ss := range s.byConn {
		conns = append(conns, ss)
	}
	s.mu.Unlock()
	err := s.rt.Close(ctx)
	s.bgCancel()
	s.exec.Close()
	for _, ss := range conns {
		ss.Close()
	}
	s.watchers.Wait()
	if err != nil {
		return fmt.Errorf("mcpserver: close tasks: %w", err)
	}
	return nil
}

// session returns the agent session of ss, creating it at its first
// sight; nil once the server is closed.
func (s *Server) session(ss *mcp.ServerSession) *session {
	if ss == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if x, ok := s.byConn[ss]; ok {
		return x
	}
	x := &session{id: "mcp-" + strings.ToLower(rand.Text()), ss: ss}
	s.byConn[ss] = x
	s.byID[x.id] = x
	s.watchers.Go(func() {
		_ = ss.Wait() // how it ended does not matter: its tasks go
		s.end(x)
	})
	return x
}

// end forgets an ended session and kills its tasks.
func (s *Server) end(x *session) {
	s.mu.Lock()
	delete(s.byConn, x.ss)
	delete(s.byID, x.id)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), disposeTimeout)
	defer cancel()
	_ = s.rt.Dispose(ctx, x.id) // after the timeout the kills stay requested
	s.sessions.ClearSessionMode(x.id)
}

func (s *Server) lookup(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id]
}

// handler runs t for an MCP tools/call.
func (s *Server) handler(t call.Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		x := s.session(req.Session)
		if x == nil {
			return nil, errors.New("dsh-sandbox: the server is shutting down")
		}
		x.mu.Lock()
		x.calls++
		id := "call-" + strconv.Itoa(x.calls)
		x.mu.Unlock()
		ws, err := s.workspace(ctx, x)
		if err != nil {
			return result(call.Error(err.Error()), x.takeNotices()), nil
		}
		args := req.Params.Arguments
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		c := call.Context{Agent: &call.Agent{Session: x.id, Workspace: ws}, ID: id}
		// A client that asked for progress gets the command's last output
		// line every few seconds: long calls outlive its request timeout
		// when it resets that timeout on progress.
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			p := &progress{}
			c.Output = p.write
			defer p.report(ctx, req.Session, tok, s.progress)()
		}
		res := t.Call(ctx, c, args)
		return result(res, x.takeNotices()), nil
	}
}

// MetaSandbox is the _meta key of a bash result's sandbox facts (what the
// sandbox denied, what the command changed, how it was confined: the
// library's sandbox.Facts as JSON). It is for the client, beside the text
// the model reads, which stays the tool's own.
const MetaSandbox = "io.github.dsh-sandbox/sandbox"

// result is the MCP result of a tool result: its text as the first text
// content, then the session's pending completion notices; a foreground
// bash result carries its sandbox facts in _meta (MetaSandbox).
func result(r call.Result, notices []string) *mcp.CallToolResult {
	content := []mcp.Content{&mcp.TextContent{Text: r.Text}}
	for _, n := range notices {
		content = append(content, &mcp.TextContent{Text: n})
	}
	res := &mcp.CallToolResult{Content: content, IsError: r.IsError}
	if v, ok := r.Value.(tool.Value); ok && v.RunResult != nil {
		res.Meta = mcp.Meta{MetaSandbox: v.RunResult.Sandbox}
	}
	return res
}

func (x *session) takeNotices() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.notices
	x.notices = nil
	return n
}

// notifier delivers completion notices to the owning session.
type notifier struct{ s *Server }

func (n notifier) Notify(owner, text string) {
	x := n.s.lookup(owner)
	if x == nil {
		return // the session ended: its tasks were disposed of
	}
	x.mu.Lock()
	x.notices = append(x.notices, text)
	x.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), logTimeout)
	defer cancel()
	// Best effort: the notice also waits for the session's next result.
	_ = x.ss.Log(ctx, &mcp.LoggingMessageParams{Level: "notice", Logger: LoggerName, Data: text})
}
