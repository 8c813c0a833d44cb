package tool

import (
	"context"

	"github.com/dsh-sandbox/dsh-sandbox/tool/call"
)

// ApprovalOutcome is the answer of an Approver.
type ApprovalOutcome string

// The four outcomes of an approval request.
const (
	// AllowedOnce: the requested mode applies to this one call only.
	AllowedOnce ApprovalOutcome = "allowed-once"
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
	// Reason is "escalate sandbox to <mode>: <justification>".
	Reason string
}

// Approver asks the user whether a call may run in a wider sandbox mode.
// The harness implements it. ctx is the call's abort signal: an approver
// should return Cancelled when it is done. Any outcome other than
// AllowedOnce refuses the call.
type Approver interface {
	Approve(ctx context.Context, r ApprovalRequest) ApprovalOutcome
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, r ApprovalRequest) ApprovalOutcome

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, r ApprovalRequest) ApprovalOutcome {
	return f(ctx, r)
}
