package tool

import (
	"encoding/json"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// description is the bash tool's description, with the background and
// escalation paragraphs only when they apply.
func description(background, confines bool) string {
	var b strings.Builder
	b.WriteString("Runs a shell command with `bash -c` and returns its output.\n\n" +
		"No state persists between calls: set `workdir` instead of using `cd`, and give each command " +
		"everything it needs (environment variables, paths). `workdir` defaults to your session's workspace; " +
		"a relative one is resolved against it.\n\n" +
		"The result is stdout, then `[stderr]` and stderr, or `(no output)`. Long output keeps its tail and ends " +
		"with `[output truncated; full output: <path>]`. Status markers follow, each on its own line: " +
		"`[timed out after Nms]` when the timeout fired, then `[killed by signal: SIG]` or `[exit code: N]` last. " +
		"A non-zero exit code is a result to read and act on, not a tool failure: check it on every call.")
	if background {
		b.WriteString("\n\nSet `run_in_background` for commands that keep running (servers, watchers, long builds): " +
			"the call returns `started background task <id>` at once, no timeout applies, and you read new output " +
			"with task_output and stop the task with task_kill. A finished task leaves a notice for your next turn; " +
			"it does not wake you, so poll with task_output when you need the result.")
	}
	if confines {
		b.WriteString("\n\nCommands run in a sandbox, in your session's mode: read-only, workspace-write or " +
			"danger-full-access. `[sandbox: file access denied under <mode> mode]` or `[sandbox: network access " +
			"denied under <mode> mode]` means the sandbox blocked the command. Only after such a real denial, and only in the same turn, you may retry that exact command " +
			"once with `sandbox_permissions` set to the narrowest wider mode that suffices and a one-sentence " +
			"`justification`; the user is asked to approve. Never escalate speculatively or to work around " +
			"something else. A rejection is final: do not retry it or look for a way around it.")
	}
	return b.String()
}

// schema is the JSON schema (draft 2020-12) of the arguments.
func schema(background, confines bool) json.RawMessage {
	type prop = map[string]any
	props := map[string]any{
		keyCommand: prop{"type": "string", "minLength": 1,
			"description": "The command, run as `bash -c <command>`. No state persists between calls."},
		keyDescription: prop{"type": "string", "minLength": 1,
			"description": "One line, active voice, 5-10 words: what the command does (shown to the user; no effect on execution)."},
		keyTimeoutMs: prop{"type": "number", "exclusiveMinimum": 0,
			"description": "Timeout in milliseconds (default 120000, at most 600000). When it fires the command gets SIGTERM, then SIGKILL."},
		keyWorkdir: prop{"type": "string",
			"description": "Working directory for this call; relative paths resolve against the session's workspace, which is the default. Use this instead of `cd`."},
	}
	if background {
		props[keyBackground] = prop{"type": "boolean",
			"description": "Run in the background: returns a task id at once; no timeout applies. Read output with task_output, stop with task_kill."}
	}
	if confines {
		var targets []string
		for _, t := range modes.EscalationTargets() {
			targets = append(targets, t.String())
		}
		props[keyPermissions] = prop{"type": "string", "enum": targets,
			"description": "Only to retry, in the same turn, a command the sandbox denied: the narrowest wider sandbox mode that suffices. Requires `justification`; the user is asked to approve this one call."}
		props[keyJustification] = prop{"type": "string", "minLength": 1,
			"description": "With sandbox_permissions only: one sentence telling the user why this command needs the wider mode."}
	}
	s := map[string]any{
		"$schema":    "https://json-schema.org/draft/2020-12/schema",
		"type":       "object",
		"properties": props,
		"required":   []string{keyCommand, keyDescription},
	}
	b, _ := json.Marshal(s) // maps of strings, numbers and lists: cannot fail
	return b
}
