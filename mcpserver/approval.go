package mcpserver

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-sandbox/dsh-sandbox/tool"
)

// approver asks escalations of the bash tool through MCP elicitation, to
// the session that made the call. It never approves on its own.
type approver struct{ s *Server }

// noFields is the requested schema of an approval: no fields, the user's
// answer is the action (accept, decline, cancel).
var noFields = map[string]any{"type": "object", "properties": map[string]any{}}

func (a approver) Approve(ctx context.Context, r tool.ApprovalRequest) tool.ApprovalOutcome {
	if r.Agent == nil {
		return tool.Unavailable
	}
	x := a.s.lookup(r.Agent.Session)
	if x == nil {
		return tool.Unavailable
	}
	if ip := x.ss.InitializeParams(); ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return tool.Unavailable
	}
	res, err := x.ss.Elicit(ctx, &mcp.ElicitParams{Mode: "form", Message: approvalMessage(r), RequestedSchema: noFields})
	switch {
	case err != nil && ctx.Err() != nil:
		return tool.Cancelled
	case err != nil:
		return tool.Unavailable
	}
	switch res.Action {
	case "accept":
		return tool.AllowedOnce
	case "decline":
		return tool.Rejected
	case "cancel":
		return tool.Cancelled
	}
	return tool.Unavailable
}

// approvalMessage is what the user is asked.
func approvalMessage(r tool.ApprovalRequest) string {
	var b strings.Builder
	b.WriteString("The agent asks to run one command with a wider sandbox. Accept runs this one call so; decline refuses it.\n\n")
	b.WriteString(r.Reason)
	return b.String()
}
