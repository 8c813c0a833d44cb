// Package tasks is the background task runtime shared by the model-facing
// tools: ids "<kind>-<n>", ownership (the calling agent's session, recorded
// at spawn and kept after completion), statuses, a per-owner limit,
// consuming reads, waits, cancellation, completion notices and disposal;
// plus the tools task_output, task_list and task_kill, and the older
// bash_output and bash_kill as aliases over the same runtime. Producers
// (the bash tool) hand it a Handle per task.
package tasks

// Decisions on the points the contract leaves open:
//
//   - Limit: at most Options.Limit (default 10) running+stopping tasks per
//     owner, counted together with the Starts of that owner still spawning
//     (a slot is reserved before spawn and released when spawn fails). The
//     owner "" (tasks started with no agent) is one shared owner for the
//     limit, so non-agent callers are bounded too.
//   - Ids are never reused: a failed spawn burns its number.
//   - Reads: the status is taken before the output is read, so a read that
//     reports a final status holds all the output. The text is the output
//     (or "(no new output)") and the status line, with exactly one newline
//     between them: a trailing newline of the output serves as that newline.
//   - timeout_ms: absent or null means 30000; values above 600000 are
//     capped; it is judged after the ownership check, also without wait. A
//     wait whose call context ends returns "wait aborted" and consumes
//     nothing (the end, if it came, stays the notice's).
//   - Notices: only for owned tasks, at most once, when the task ends —
//     unless the owner already consumed the end: it called task_kill (or
//     bash_kill) on it, running or finished; a read (task_output with or
//     without wait, bash_output) reported its final status; or its tasks
//     were disposed (Dispose, Close). While a wait on the task is in
//     progress the notice is held: a wait that returns the end consumes it,
//     one that times out with the task still live or is aborted releases it.
//     task_list does not consume the end (it shows no output).
//   - bash_output and bash_kill are task_output (without wait) and
//     task_kill (without reason) under the older names: same errors, same
//     "[status: <status>, <detail>]" line (e.g. "[status: completed, exit
//     code: 0]"), for any kind of task.
//   - A second task_kill of a stopping task answers "requested cancellation
//     of task <id>" again without calling Handle.Cancel again.
//   - Tool schemas say additionalProperties: false; Call ignores unknown
//     keys anyway.
