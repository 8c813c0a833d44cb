package tasks

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
)

// Defaults and caps.
const (
	// DefaultLimit is the per-owner limit of running+stopping tasks when
	// Options.Limit is not positive.
	DefaultLimit = 10
	// DefaultWaitTimeoutMs is task_output's wait timeout when timeout_ms is
	// absent (or null).
	DefaultWaitTimeoutMs = 30000
	// MaxWaitTimeoutMs caps task_output's wait timeout.
	MaxWaitTimeoutMs = 600000
)

// Model-facing texts (exact).
const (
	noNewOutput = "(no new output)"
	noTasks     = "(no background tasks)"
)

// Error kinds, for errors.Is. The errors the runtime returns carry the
// exact model-facing message as their Error() text and unwrap to one of
// these.
var (
	// ErrUnknownTask: "unknown task <id>".
	ErrUnknownTask = errors.New("unknown task")
	// ErrForeignTask: "task <id> belongs to another session".
	ErrForeignTask = errors.New("task belongs to another session")
	// ErrLimit: "background task limit reached for this owner (limit: N); …".
	ErrLimit = errors.New("background task limit reached")
	// ErrInvalidWaitTimeout: "invalid wait timeout: expected a positive
	// number of milliseconds, got <v>".
	ErrInvalidWaitTimeout = errors.New("invalid wait timeout")
	// ErrWaitAborted: "wait aborted" (it also unwraps to the context's
	// error).
	ErrWaitAborted = errors.New("wait aborted")
	// ErrClosed: Start after Close.
	ErrClosed = errors.New("background task runtime is closed")
	// ErrDisposing: Start for an owner whose tasks are being disposed.
	ErrDisposing = errors.New("background tasks of this owner are being disposed")
	// ErrInvalidStart: Start with an empty kind or a nil spawn function.
	ErrInvalidStart = errors.New("invalid task start")
)

// taskError is an error with an exact message and a kind (and optionally a
// cause) for errors.Is.
type taskError struct {
	msg   string
	kind  error
	cause error
}

func (e *taskError) Error() string { return e.msg }

func (e *taskError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.kind, e.cause}
	}
	return []error{e.kind}
}

func errUnknownTask(id string) error {
	return &taskError{msg: "unknown task " + id, kind: ErrUnknownTask}
}

func errForeignTask(id string) error {
	return &taskError{msg: "task " + id + " belongs to another session", kind: ErrForeignTask}
}

func errLimit(limit int) error {
	return &taskError{
		msg:  "background task limit reached for this owner (limit: " + strconv.Itoa(limit) + "); use task_kill to stop an unneeded task, wait for it to finish, then retry",
		kind: ErrLimit,
	}
}

// errInvalidWaitTimeout: got is the JSON text of the value given.
func errInvalidWaitTimeout(got string) error {
	return &taskError{
		msg:  "invalid wait timeout: expected a positive number of milliseconds, got " + got,
		kind: ErrInvalidWaitTimeout,
	}
}

func errWaitAborted(cause error) error {
	return &taskError{msg: "wait aborted", kind: ErrWaitAborted, cause: cause}
}

func errClosed() error { return &taskError{msg: ErrClosed.Error(), kind: ErrClosed} }

func errDisposing() error { return &taskError{msg: ErrDisposing.Error(), kind: ErrDisposing} }

func errInvalidStart(msg string) error { return &taskError{msg: msg, kind: ErrInvalidStart} }

// StatusLine renders "[status: <status>]", or "[status: <status>,
// <detail>]" when detail is not empty.
func StatusLine(status Status, detail string) string {
	if detail == "" {
		return "[status: " + string(status) + "]"
	}
	return "[status: " + string(status) + ", " + detail + "]"
}

// joinOutput renders a read: the new output, or "(no new output)" when
// there is none, then the status line, with exactly one newline between
// them (a trailing newline of the output is that newline).
func joinOutput(output, statusLine string) string {
	switch {
	case output == "":
		return noNewOutput + "\n" + statusLine
	case strings.HasSuffix(output, "\n"):
		return output + statusLine
	default:
		return output + "\n" + statusLine
	}
}

// oneLine folds line breaks of a label into spaces so that a list line or a
// notice stays on one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", " ")
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// listLine renders "<id> [<kind>] <status> — <label>" (an em dash).
func listLine(in Info) string {
	return in.ID + " [" + in.Kind + "] " + string(in.Status) + " \u2014 " + oneLine(in.Label)
}

// noticeText renders the completion notice.
func noticeText(in Info) string {
	return "background task " + in.ID + " (" + in.Kind + ": " + oneLine(in.Label) + ") finished " +
		StatusLine(in.Status, in.Detail) + ". Read its output with task_output."
}

func requestedText(id string) string { return "requested cancellation of task " + id }

func alreadyFinishedText(id string, status Status, detail string) string {
	return "task " + id + " had already finished " + StatusLine(status, detail)
}

// floatJSON renders a float as JSON would (finite values), and non-finite
// values by their JavaScript names (NaN, Infinity, -Infinity), which have
// no JSON form.
func floatJSON(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return string(b)
}
