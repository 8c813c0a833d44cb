// Package tool is the model-facing bash tool: its JSON schema and
// description, argument decoding and validation with the contract's exact
// errors, the effective sandbox mode of a call (approved escalation >
// session override > executor default), escalation through an Approver,
// foreground runs and background tasks (through package tasks), the result
// text in the contract's marker order, the system prompt section, a policy
// context text, and pure presentation functions (PresentCall,
// PresentResult) for terminal cards.
package tool
