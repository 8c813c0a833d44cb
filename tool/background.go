package tool

import (
	"strconv"
	"strings"
	"sync"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/tasks"
)

// taskHandle adapts a background executor.Process to the task runtime: reads
// render the new output with the bash markers, and the end maps to a task
// outcome.
type taskHandle struct {
	done     <-chan struct{}
	confines bool

	mu sync.Mutex
	// p is released once the read that follows its end has returned
	// everything, so that a finished task the runtime keeps (for its id,
	// owner and status) no longer holds its output tails.
	p   *executor.Process
	end tasks.Outcome // valid once p is released
}

var _ tasks.Handle = (*taskHandle)(nil)

func newTaskHandle(p *executor.Process, confines bool) *taskHandle {
	return &taskHandle{p: p, done: p.Done(), confines: confines}
}

// Read renders the output since the previous read: stdout, then [stderr]
// and stderr, a notice when unread bytes were dropped from memory, and —
// once, in the first read after the process settled, which also releases
// it — the denial marker (with the escalation hint) or the runner-failure
// marker.
func (h *taskHandle) Read() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.p == nil {
		return ""
	}
	// Settled before reading means the read below holds everything.
	res := h.p.Result()
	d := h.p.Read()
	var parts []string
	if d.Stdout != "" {
		parts = append(parts, strings.TrimSuffix(d.Stdout, "\n"))
	}
	if d.Stderr != "" {
		parts = append(parts, stderrHeading+"\n"+strings.TrimSuffix(d.Stderr, "\n"))
	}
	if d.Lossy {
		parts = append(parts, LossyNotice(d.SpillPaths))
	}
	if res != nil {
		parts = append(parts, sandboxMarkers(res, h.confines)...)
		h.end, h.p = outcomeOf(res), nil
	}
	return strings.Join(parts, "\n")
}

// Cancel stops the process: SIGTERM to its group, SIGKILL to the whole
// tree after the grace.
func (h *taskHandle) Cancel() {
	h.mu.Lock()
	p := h.p
	h.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// Done is closed once the process settled.
func (h *taskHandle) Done() <-chan struct{} { return h.done }

// Outcome maps the end: killed (Cancel or the runtime's context) with
// "signal: <SIG>" or "killed before exit"; a lost runner: failed; anything
// else: completed with "exit code: <N>".
func (h *taskHandle) Outcome() tasks.Outcome {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.p == nil {
		return h.end
	}
	return outcomeOf(h.p.Result())
}

func outcomeOf(r *executor.RunResult) tasks.Outcome {
	switch {
	case r == nil:
		return tasks.Outcome{Status: tasks.StatusRunning}
	case r.Sandbox.RunnerFailed:
		return tasks.Outcome{Status: tasks.StatusFailed, Detail: "sandbox runner failed"}
	case r.Killed || r.Aborted:
		if r.Signal != "" {
			return tasks.Outcome{Status: tasks.StatusKilled, Detail: "signal: " + r.Signal}
		}
		return tasks.Outcome{Status: tasks.StatusKilled, Detail: "killed before exit"}
	}
	return tasks.Outcome{Status: tasks.StatusCompleted, Detail: "exit code: " + strconv.Itoa(r.ExitCode)}
}
