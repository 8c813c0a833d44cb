package tool

import (
	"context"
	"slices"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// ApprovalOutcome is the answer of an Approver.
type ApprovalOutcome string

// The outcomes of an approval request.
const (
	// AllowedOnce: the requested mode applies to this one call only.
	AllowedOnce ApprovalOutcome = "allowed-once"
	// AllowedGrants: instead of the wider mode, this one call runs in its
	// current mode with ApprovalRequest.Grants added (these directories
	// writable, these destinations reachable), every other layer kept.
	AllowedGrants ApprovalOutcome = "allowed-grants"
	// Rejected: the user said no; the rejection is final.
	Rejected ApprovalOutcome = "rejected"
	// Cancelled: the prompt was dismissed or withdrawn.
	Cancelled ApprovalOutcome = "cancelled"
	// Unavailable: there is no channel to ask the user through.
	Unavailable ApprovalOutcome = "unavailable"
)

// ApprovalRequest is what the bash tool asks an Approver.
type ApprovalRequest struct {
	// Agent is the calling agent (never nil: a call without one is refused
	// before asking).
	Agent *call.Agent
	// Tool is "bash".
	Tool string
	// CallID is the tool call's id.
	CallID string
	// Reason is "escalate sandbox to <mode>: <justification>", the
	// contract's one-line summary; the fields below say the same in parts,
	// for a prompt that shows the user what exactly is approved.
	Reason string

	// Command is the command line to run (bash -c), exactly as the model
	// sent it, and Description the model's 5-10 word summary of it.
	Command     string
	Description string
	// Workdir is the directory the command would run in (absolute; the
	// model's own value when it cannot be resolved: the call then fails
	// after approval with that error).
	Workdir string
	// Current is the mode the call would run under without the escalation,
	// Requested the wider one asked for.
	Current, Requested modes.Mode
	// Justification is the model's reason for asking.
	Justification string
	// Denials are what the sandbox denied in the same session's previous
	// foreground call of this exact command, when that call was denied:
	// the facts the escalation means to get past. Empty otherwise.
	Denials []sandbox.Denial
	// Grants are the narrow settings the denials suggest (allow_write,
	// allow_domain, allow_host, unprotect), each allowing exactly one of
	// them: what AllowedGrants adds. Empty when there is nothing narrower
	// than the mode to offer.
	Grants []sandbox.Suggestion
}

// grantable are the suggested settings an approver may grant for one call
// instead of a wider mode.
var grantable = []string{"allow_write", "allow_domain", "allow_host", "unprotect"}

// grantsOf are the distinct grantable suggestions of ds.
func grantsOf(ds []sandbox.Denial) []sandbox.Suggestion {
	var out []sandbox.Suggestion
	for _, d := range ds {
		if s := d.Suggest; s != nil && slices.Contains(grantable, s.Setting) && !slices.Contains(out, *s) {
			out = append(out, *s)
		}
	}
	return out
}

// grant is the executor's Grant of gs.
func grant(gs []sandbox.Suggestion) *executor.Grant {
	g := &executor.Grant{}
	for _, s := range gs {
		switch s.Setting {
		case "allow_write":
			g.AllowWrite = append(g.AllowWrite, s.Value)
		case "allow_domain":
			g.AllowDomain = append(g.AllowDomain, s.Value)
		case "allow_host":
			g.AllowHost = append(g.AllowHost, s.Value)
		case "unprotect":
			g.Unprotect = append(g.Unprotect, s.Value)
		}
	}
	return g
}

// Approver asks the user whether a call may run in a wider sandbox mode.
// The harness implements it. ctx is the call's abort signal: an approver
// should return Cancelled when it is done. Any outcome other than
// AllowedOnce and (with Grants to give) AllowedGrants refuses the call.
type Approver interface {
	Approve(ctx context.Context, r ApprovalRequest) ApprovalOutcome
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, r ApprovalRequest) ApprovalOutcome

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, r ApprovalRequest) ApprovalOutcome {
	return f(ctx, r)
}
