package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-sandbox/dsh-sandbox/internal/printable"
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
	schema := any(noFields)
	if len(r.Grants) > 0 {
		schema = choiceSchema(r)
	}
	res, err := x.ss.Elicit(ctx, &mcp.ElicitParams{Mode: "form", Message: approvalMessage(r), RequestedSchema: schema})
	switch {
	case err != nil && ctx.Err() != nil:
		return tool.Cancelled
	case err != nil:
		return tool.Unavailable
	}
	switch res.Action {
	case "accept":
		if len(r.Grants) > 0 && res.Content[allowField] == allowJust {
			return tool.AllowedGrants
		}
		return tool.AllowedOnce
	case "decline":
		return tool.Rejected
	case "cancel":
		return tool.Cancelled
	}
	return tool.Unavailable
}

// The approval form's one field when narrower grants can be offered: allow
// just what the denials suggested, or the wider mode.
const (
	allowField = "allow"
	allowJust  = "just-these"
	allowMode  = "mode"
)

// choiceSchema is the requested schema offering "allow just these" next to
// "allow the mode", the narrow choice first and the form's default.
func choiceSchema(r tool.ApprovalRequest) map[string]any {
	var just []string
	for _, g := range r.Grants {
		just = append(just, g.Flag)
	}
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			allowField: map[string]any{
				"type":        "string",
				"title":       "Allow",
				"description": "Allow just these (" + printable.Text(strings.Join(just, ", ")) + ") in " + r.Current.String() + " mode, or the whole " + r.Requested.String() + " mode, for this one call.",
				"enum":        []string{allowJust, allowMode},
				"enumNames":   []string{"Just these, in " + r.Current.String() + " mode", "The " + r.Requested.String() + " mode"},
				"default":     allowJust,
			},
		},
		// Not required: a client that accepts without filling the form
		// (content {}) gets the mode it was asked for, as before.
	}
}

// maxDenialLines is how many of the previous run's denials the message
// lists.
const maxDenialLines = 5

// approvalMessage is what the user is asked: the command, where it runs,
// the mode change, the model's reason, and what the sandbox denied when the
// command last ran in this session.
func approvalMessage(r tool.ApprovalRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Allow this command to run once in %s mode (now %s)?\n\n", r.Requested, r.Current)
	fmt.Fprintf(&b, "Command: %s\n", printable.Text(r.Command))
	if r.Description != "" {
		fmt.Fprintf(&b, "About: %s\n", printable.Text(r.Description))
	}
	fmt.Fprintf(&b, "Workdir: %s\n", printable.Text(r.Workdir))
	fmt.Fprintf(&b, "Mode: %s -> %s\n", r.Current, r.Requested)
	fmt.Fprintf(&b, "Justification: %s\n", printable.Text(r.Justification))
	for i, d := range r.Denials {
		if i == maxDenialLines {
			fmt.Fprintf(&b, "... and %d more denials\n", len(r.Denials)-i)
			break
		}
		fmt.Fprintf(&b, "Last run: %s\n", d.Line(r.Current))
	}
	if len(r.Grants) > 0 {
		b.WriteString("\nNarrower: allow just")
		for _, g := range r.Grants {
			fmt.Fprintf(&b, " %s", printable.Text(g.Flag))
		}
		fmt.Fprintf(&b, " for this call, keeping %s mode.\n", r.Current)
		b.WriteString("\nAccept runs only this call, with what you choose; decline refuses it.")
		return b.String()
	}
	b.WriteString("\nAccept runs only this call in the wider mode; decline refuses it.")
	return b.String()
}
