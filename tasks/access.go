package tasks

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/call"
)

// OutputResult is one read of a task (task_output, bash_output).
type OutputResult struct {
	TaskID string `json:"taskId"`
	Status Status `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Output is the new output ("" when there was none).
	Output string `json:"output"`
	// Waited: the read waited for the task; TimedOut: the wait ended on
	// its timeout with the task still live.
	Waited   bool `json:"waited,omitempty"`
	TimedOut bool `json:"timedOut,omitempty"`
	// Text is the model-facing text: the output, or "(no new output)",
	// then the status line.
	Text string `json:"-"`
}

// KillResult is the answer of task_kill / bash_kill.
type KillResult struct {
	TaskID string `json:"taskId"`
	Status Status `json:"status"`
	Detail string `json:"detail,omitempty"`
	// AlreadyFinished: the task had ended before the kill (a no-op).
	AlreadyFinished bool `json:"alreadyFinished,omitempty"`
	// Text is the model-facing text.
	Text string `json:"-"`
}

// waitSpec is a read's wait request; timeout values are judged after the
// ownership check.
type waitSpec struct {
	wait  bool
	set   bool    // a timeout was given
	ms    float64 // the timeout, when set and number
	valid bool    // the given timeout is a finite number
	raw   string  // the JSON of the given timeout, for the error
}

func (s waitSpec) duration() (time.Duration, error) {
	ms := float64(DefaultWaitTimeoutMs)
	if s.set {
		if !s.valid || math.IsNaN(s.ms) || math.IsInf(s.ms, 0) || !(s.ms > 0) {
			return 0, errInvalidWaitTimeout(s.raw)
		}
		ms = min(s.ms, MaxWaitTimeoutMs)
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

// lookup finds a task the caller may access: an unowned one, or one owned
// by the caller's session (a caller with no agent has owner "" and so
// reaches unowned tasks only).
func (r *Runtime) lookup(c call.Context, id string) (*task, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tasks[id]
	if !ok {
		return nil, errUnknownTask(id)
	}
	if t.owner != "" && t.owner != c.Owner() {
		return nil, errForeignTask(id)
	}
	return t, nil
}

// Output reads the task's output since the previous read (consuming), as
// the caller c. Ownership is checked first (ErrUnknownTask,
// ErrForeignTask), then the timeout (ErrInvalidWaitTimeout: nil means
// DefaultWaitTimeoutMs, values above MaxWaitTimeoutMs are capped; it is
// checked even without wait). With wait, it first waits until the task
// ends or the timeout elapses; if ctx ends first, or had ended already, it
// returns ErrWaitAborted and consumes nothing.
//
// The status is taken before the output is read, so a read that reports a
// final status holds all of the task's output; such a read consumes the
// end: no completion notice follows.
func (r *Runtime) Output(ctx context.Context, c call.Context, id string, wait bool, timeout *float64) (OutputResult, error) {
	s := waitSpec{wait: wait}
	if timeout != nil {
		s.set, s.ms, s.valid, s.raw = true, *timeout, !math.IsNaN(*timeout) && !math.IsInf(*timeout, 0), floatJSON(*timeout)
	}
	return r.output(ctx, c, id, s)
}

func (r *Runtime) output(ctx context.Context, c call.Context, id string, s waitSpec) (OutputResult, error) {
	t, err := r.lookup(c, id)
	if err != nil {
		return OutputResult{}, err
	}
	d, err := s.duration()
	if err != nil {
		return OutputResult{}, err
	}
	if !s.wait {
		return r.read(t, false, false), nil
	}
	if err := ctx.Err(); err != nil {
		return OutputResult{}, errWaitAborted(err)
	}
	if isDone(t.h) {
		return r.read(t, false, true), nil
	}

	r.mu.Lock()
	t.waiters++
	r.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.h.Done():
	case <-timer.C:
	case <-ctx.Done():
		// Nothing consumed: the end, if it came, is the notice's.
		r.mu.Lock()
		t.waiters--
		n := r.takeNoticeLocked(t)
		r.mu.Unlock()
		r.deliver(n)
		return OutputResult{}, errWaitAborted(ctx.Err())
	}
	return r.read(t, true, true), nil
}

// read snapshots the status (recording the end when the handle is done),
// then reads the new output. leaveWait ends a wait in the same critical
// section, so the end goes either to this read or to the notice.
func (r *Runtime) read(t *task, leaveWait, waited bool) OutputResult {
	t.readMu.Lock()
	defer t.readMu.Unlock()
	done, o := observe(t)
	r.mu.Lock()
	if leaveWait {
		t.waiters--
	}
	if done {
		r.endLocked(t, o)
	}
	res := OutputResult{TaskID: t.id, Status: t.status, Detail: t.detail, Waited: waited}
	if t.ended {
		t.consumed = true
	} else {
		res.TimedOut = waited
	}
	n := r.takeNoticeLocked(t)
	r.mu.Unlock()
	r.deliver(n)

	res.Output = t.h.Read()
	res.Text = joinOutput(res.Output, StatusLine(res.Status, res.Detail))
	return res
}

// List renders the tasks visible to c (owned by its session, or unowned)
// in id order (by kind, then by number): one line "<id> [<kind>] <status>
// — <label>" each, or "(no background tasks)". It consumes nothing.
func (r *Runtime) List(c call.Context) string {
	text, _ := r.list(c)
	return text
}

// Visible returns the tasks visible to c, in id order.
func (r *Runtime) Visible(c call.Context) []Info {
	_, infos := r.list(c)
	return infos
}

func (r *Runtime) list(c call.Context) (string, []Info) {
	owner := c.Owner()
	r.mu.Lock()
	infos := r.infosLocked(func(t *task) bool { return t.owner == "" || t.owner == owner })
	r.mu.Unlock()
	if len(infos) == 0 {
		return noTasks, []Info{}
	}
	lines := make([]string, len(infos))
	for i, in := range infos {
		lines[i] = listLine(in)
	}
	return strings.Join(lines, "\n"), infos
}

// Kill asks the task to stop, as the caller c (same ownership errors as
// Output): "requested cancellation of task <id>" (Handle.Cancel is called
// once; the status is stopping until the task ends) or, for a task that
// has ended, "task <id> had already finished [status: …]". Either way the
// owner consumed the end: no completion notice follows. reason is recorded
// (Info.KillReason), not sent to the task.
func (r *Runtime) Kill(c call.Context, id, reason string) (string, error) {
	res, err := r.kill(c, id, reason)
	return res.Text, err
}

func (r *Runtime) kill(c call.Context, id, reason string) (KillResult, error) {
	t, err := r.lookup(c, id)
	if err != nil {
		return KillResult{}, err
	}
	done, o := observe(t)
	r.mu.Lock()
	if done {
		r.endLocked(t, o)
	}
	t.consumed = true
	cancel := false
	res := KillResult{TaskID: id}
	if t.ended {
		res.AlreadyFinished = true
		res.Text = alreadyFinishedText(id, t.status, t.detail)
	} else {
		if !t.cancelRequested {
			t.cancelRequested = true
			t.status = StatusStopping
			cancel = true
		}
		if t.killReason == "" {
			t.killReason = reason
		}
		res.Text = requestedText(id)
	}
	res.Status, res.Detail = t.status, t.detail
	r.mu.Unlock()

	if cancel {
		t.h.Cancel()
	}
	return res, nil
}
