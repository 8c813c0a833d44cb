package call

import (
	"context"
	"encoding/json"
)

// Agent is the calling agent: the session whose model issued the call.
type Agent struct {
	// Session identifies the agent's session; it is the owner of the
	// background tasks the agent starts.
	Session string
	// Workspace is the session's workspace (its cwd): the base and default
	// of bash workdirs. "" means the executor's.
	Workspace string
}

// Context is one tool call. The call's abort signal is the ctx passed to
// Tool.Call.
type Context struct {
	// Agent is the caller, or nil for a call made outside an agent loop.
	Agent *Agent
	// ID is the tool call's id.
	ID string
	// Output, when not nil, receives what the call's command prints while
	// it runs in the foreground, for progress reports (an MCP server's
	// notifications/progress). It must return at once and not keep p.
	Output func(p []byte)
}

// Owner is the owner key of a caller: its session, or "" with no agent.
func (c Context) Owner() string {
	if c.Agent == nil {
		return ""
	}
	return c.Agent.Session
}

// Result is what a tool call returns: the text the model sees, whether it
// is an error, and the canonical value for programmatic consumers.
type Result struct {
	Text    string `json:"text"`
	IsError bool   `json:"isError"`
	Value   any    `json:"value,omitempty"`
}

// Error is an error result whose text is "Error: <message>".
func Error(message string) Result {
	return Result{Text: "Error: " + message, IsError: true}
}

// Tool is a model-facing tool.
type Tool interface {
	// Name is the tool's name, e.g. "bash".
	Name() string
	// Description is the tool's description as the model sees it.
	Description() string
	// Schema is the JSON schema (draft 2020-12) of the tool's arguments.
	Schema() json.RawMessage
	// Call runs one call with the model's JSON arguments. Cancelling ctx
	// aborts it.
	Call(ctx context.Context, c Context, args json.RawMessage) Result
}
