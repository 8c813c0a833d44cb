package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

	"github.com/dsh-sandbox/dsh-sandbox/call"
)

// Tool names.
const (
	ToolTaskOutput = "task_output"
	ToolTaskList   = "task_list"
	ToolTaskKill   = "task_kill"
	ToolBashOutput = "bash_output"
	ToolBashKill   = "bash_kill"
)

// ListResult is the value of a task_list result.
type ListResult struct {
	Tasks []Info `json:"tasks"`
}

// Tools returns task_output, task_list, task_kill, bash_output and
// bash_kill over r.
func Tools(r *Runtime) []call.Tool {
	return []call.Tool{NewTaskOutput(r), NewTaskList(r), NewTaskKill(r), NewBashOutput(r), NewBashKill(r)}
}

// TaskTools returns the current tools only: task_output, task_list and
// task_kill.
func TaskTools(r *Runtime) []call.Tool {
	return []call.Tool{NewTaskOutput(r), NewTaskList(r), NewTaskKill(r)}
}

// NewTaskOutput returns the task_output tool.
func NewTaskOutput(r *Runtime) call.Tool { return &taskTool{r: r, name: ToolTaskOutput} }

// NewTaskList returns the task_list tool.
func NewTaskList(r *Runtime) call.Tool { return &taskTool{r: r, name: ToolTaskList} }

// NewTaskKill returns the task_kill tool.
func NewTaskKill(r *Runtime) call.Tool { return &taskTool{r: r, name: ToolTaskKill} }

// NewBashOutput returns bash_output, the older seed's alias of task_output
// without wait.
func NewBashOutput(r *Runtime) call.Tool { return &taskTool{r: r, name: ToolBashOutput} }

// NewBashKill returns bash_kill, the older seed's alias of task_kill
// without reason.
func NewBashKill(r *Runtime) call.Tool { return &taskTool{r: r, name: ToolBashKill} }

type taskTool struct {
	r    *Runtime
	name string
}

func (t *taskTool) Name() string { return t.name }

const pollNote = "When a background task of yours finishes, a short notice is added to your context for your next request; it does not wake you up or interrupt anything, so poll with task_output (optionally with wait: true) when you need a task's result."

func (t *taskTool) Description() string {
	switch t.name {
	case ToolTaskOutput:
		return "Read the output of a background task (e.g. a bash command started with run_in_background). " +
			"Reads are consuming: you get only the output produced since your previous read of this task, never the same text twice, or \"(no new output)\" when there is none. " +
			"The last line is the task's status: \"[status: <status>]\" or \"[status: <status>, <detail>]\", where status is running, stopping, completed, killed or failed (e.g. \"[status: completed, exit code: 0]\"). " +
			"With wait: true, it blocks until the task ends or timeout_ms elapses (default 30000, at most 600000), then reads the same way; the status line tells whether the task ended. " +
			pollNote + " You can only access tasks started by your own session."
	case ToolTaskList:
		return "List the background tasks you can access (those your session started, plus any started outside a session), in id order, one per line: \"<id> [<kind>] <status> \u2014 <label>\", or \"(no background tasks)\". " +
			"Listing consumes no output; use task_output to read a task and task_kill to stop one."
	case ToolTaskKill:
		return "Stop a background task: requests cancellation (for bash: SIGTERM to its process group, then SIGKILL to the whole process tree after a short grace) and returns at once with \"requested cancellation of task <id>\". " +
			"The task shows status stopping until it has ended, then killed (or how it really ended). Killing a task that already finished is a no-op that reports its final status. " +
			"Background tasks have no timeout: kill the ones you no longer need. reason is optional, recorded for logs, and not sent to the task. Its remaining output can still be read with task_output."
	case ToolBashOutput:
		return "Read the output of a background bash task (older alias of task_output, without wait). " +
			"Returns only the output produced since the previous bash_output or task_output call for this task, or \"(no new output)\", then a status line such as \"[status: running]\", \"[status: completed, exit code: 0]\" or \"[status: killed, signal: SIGTERM]\". " +
			"When output was dropped from memory, the read says so and points at the full-output spill file. " + pollNote
	case ToolBashKill:
		return "Stop a background bash task (older alias of task_kill): SIGTERM to its process group, then SIGKILL to the whole tree after a short grace; returns at once. " +
			"Killing an already-finished task is a reported no-op; unknown task ids are errors."
	}
	return ""
}

const (
	schemaHead   = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",`
	taskIDSchema = `"task_id":{"type":"string","minLength":1,"description":"The id of the background task, e.g. \"bash-1\"."}`
)

func (t *taskTool) Schema() json.RawMessage {
	switch t.name {
	case ToolTaskOutput:
		return json.RawMessage(schemaHead + `"properties":{` + taskIDSchema + `,` +
			`"wait":{"type":"boolean","description":"Block until the task ends or timeout_ms elapses. Default false."},` +
			`"timeout_ms":{"type":"number","exclusiveMinimum":0,"description":"Longest wait in milliseconds when wait is true. Default 30000, capped at 600000."}` +
			`},"required":["task_id"],"additionalProperties":false}`)
	case ToolTaskList:
		return json.RawMessage(schemaHead + `"properties":{},"additionalProperties":false}`)
	case ToolTaskKill:
		return json.RawMessage(schemaHead + `"properties":{` + taskIDSchema + `,` +
			`"reason":{"type":"string","description":"Optional: why the task is stopped (for logs)."}` +
			`},"required":["task_id"],"additionalProperties":false}`)
	default: // bash_output, bash_kill
		return json.RawMessage(schemaHead + `"properties":{` + taskIDSchema + `},"required":["task_id"],"additionalProperties":false}`)
	}
}

// Call runs one call. Keys the schema does not name are ignored.
func (t *taskTool) Call(ctx context.Context, c call.Context, raw json.RawMessage) call.Result {
	args, err := parseArgs(raw)
	if err != nil {
		return call.Error(err.Error())
	}
	if t.name == ToolTaskList {
		text, infos := t.r.list(c)
		return call.Result{Text: text, Value: ListResult{Tasks: infos}}
	}
	id, err := taskIDArg(args)
	if err != nil {
		return call.Error(err.Error())
	}
	switch t.name {
	case ToolTaskOutput, ToolBashOutput:
		s := waitSpec{}
		if t.name == ToolTaskOutput {
			if s.wait, err = boolArg(args, "wait"); err != nil {
				return call.Error(err.Error())
			}
			s = timeoutArg(args, s)
		}
		res, err := t.r.output(ctx, c, id, s)
		if err != nil {
			return call.Error(err.Error())
		}
		return call.Result{Text: res.Text, Value: res}
	default: // task_kill, bash_kill
		reason := ""
		if t.name == ToolTaskKill {
			if reason, err = stringArg(args, "reason"); err != nil {
				return call.Error(err.Error())
			}
		}
		res, err := t.r.kill(c, id, reason)
		if err != nil {
			return call.Error(err.Error())
		}
		return call.Result{Text: res.Text, Value: res}
	}
}

type argError string

func (e argError) Error() string { return string(e) }

// parseArgs decodes the arguments object; empty or null arguments are an
// empty object.
func parseArgs(raw json.RawMessage) (map[string]json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return map[string]json.RawMessage{}, nil
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &args); err != nil || args == nil {
		return nil, argError("invalid arguments: expected a JSON object, got " + jsonText(trimmed))
	}
	return args, nil
}

// jsonText is the compact JSON text of a given value ("null" when absent).
func jsonText(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "null"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(bytes.TrimSpace(raw))
	}
	return b.String()
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

func taskIDArg(args map[string]json.RawMessage) (string, error) {
	raw := args["task_id"]
	var id string
	if isNull(raw) || json.Unmarshal(raw, &id) != nil || id == "" {
		return "", argError("invalid task_id: expected a non-empty string, got " + jsonText(raw))
	}
	return id, nil
}

// boolArg: absent or null is false.
func boolArg(args map[string]json.RawMessage, key string) (bool, error) {
	raw, ok := args[key]
	if !ok || isNull(raw) {
		return false, nil
	}
	var v bool
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, argError("invalid " + key + ": expected a boolean, got " + jsonText(raw))
	}
	return v, nil
}

// stringArg: absent or null is "".
func stringArg(args map[string]json.RawMessage, key string) (string, error) {
	raw, ok := args[key]
	if !ok || isNull(raw) {
		return "", nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", argError("invalid " + key + ": expected a string, got " + jsonText(raw))
	}
	return v, nil
}

// timeoutArg records timeout_ms as given (absent or null: the default);
// the runtime judges it after the ownership check. A number token out of
// float64 range (1e999) is not finite and so invalid.
func timeoutArg(args map[string]json.RawMessage, s waitSpec) waitSpec {
	raw, ok := args["timeout_ms"]
	if !ok || isNull(raw) {
		return s
	}
	s.set = true
	s.raw = jsonText(raw)
	var num json.Number
	if json.Unmarshal(raw, &num) != nil {
		return s // not a number (a quoted string decodes into json.Number too; see below)
	}
	if tok := bytes.TrimSpace(raw); len(tok) > 0 && tok[0] == '"' {
		return s
	}
	v, err := strconv.ParseFloat(num.String(), 64)
	if err != nil {
		return s
	}
	s.ms, s.valid = v, true
	return s
}
