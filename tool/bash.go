package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/transaction"
	"github.com/dsh-sandbox/dsh-sandbox/tasks"
)

// Name is the bash tool's name.
const Name = "bash"

// TaskKind is the kind of the background tasks the bash tool starts.
const TaskKind = "bash"

// Errors the model sees (after "Error: ") besides argument validation.
const (
	errBackgroundDisabled    = "background execution is disabled for this bash tool"
	errBackgroundUnavailable = "background tasks unavailable: load @deepseek-ai/dsh-tasks and @deepseek-ai/dsh-tool-tasks"
	errNoEscalation          = "sandbox_permissions is not available in this composition (no sandboxing executor to escalate)"
	errAborted               = "tool call aborted"
	// (not in the contract: Options.Transaction is this project's)
	errTransactionUnconfined = "this session's commands run in a transaction: under %s a command would write to the workspace directly"
)

// EnvFunc collects the managed DSH_* environment of one call (see package
// envreg); background reports whether the call starts a background task.
type EnvFunc func(ctx context.Context, c call.Context, background bool) (map[string]string, error)

// Options configures the bash tool.
type Options struct {
	// Executor runs the commands. Required.
	Executor *executor.Executor
	// Tasks is the background task runtime; nil makes run_in_background
	// fail with "background tasks unavailable".
	Tasks *tasks.Runtime
	// DisableBackground removes run_in_background from the schema and
	// refuses calls that set it.
	DisableBackground bool
	// Approver asks the user about escalations; nil refuses them.
	Approver Approver
	// Sessions holds per-session modes; nil means none is ever set.
	Sessions *SessionModes
	// Env collects the managed DSH_* variables of each call; nil means none.
	Env EnvFunc
	// BackgroundContext bounds background commands (they outlive their
	// call); cancelling it kills them. nil means context.Background().
	BackgroundContext context.Context
	// Transaction, when not nil, returns the transaction a call's command
	// runs in, or nil for none (executor.Request.Transaction): say one per
	// agent session, which the user reviews, then commits or discards. A
	// call that would run under danger-full-access in a transaction is
	// refused: it would write to the workspace directly.
	Transaction func(call.Context) *transaction.Tx
}

// Bash is the model-facing bash tool. It implements call.Tool and is safe
// for concurrent use.
type Bash struct {
	o        Options
	confines bool
	// denied remembers each session's last denied foreground call, for
	// the approval request of an escalation that retries it.
	denied recentDenials
	bgCtx  context.Context
	schema json.RawMessage
	desc   string
}

var _ call.Tool = (*Bash)(nil)

// New builds the bash tool.
func New(o Options) (*Bash, error) {
	if o.Executor == nil {
		return nil, errors.New("tool: bash needs an executor")
	}
	b := &Bash{o: o, confines: o.Executor.Mode().Confines(), bgCtx: o.BackgroundContext}
	if b.bgCtx == nil {
		b.bgCtx = context.Background()
	}
	b.desc = description(!o.DisableBackground, b.confines)
	b.schema = schema(!o.DisableBackground, b.confines)
	return b, nil
}

// Name returns "bash".
func (b *Bash) Name() string { return Name }

// Description is the tool's description as the model sees it.
func (b *Bash) Description() string { return b.desc }

// Schema is the JSON schema of the arguments: run_in_background only when
// background is enabled; sandbox_permissions and justification only when
// the executor confines.
func (b *Bash) Schema() json.RawMessage { return b.schema }

// Confines reports whether the executor confines (its default mode is not
// danger-full-access): only then are escalation and session modes offered.
func (b *Bash) Confines() bool { return b.confines }

// EffectiveMode is the mode a call without escalation runs under: the
// session override, else the executor's default. Calls with no agent, and
// non-confining executors, carry no session override.
func (b *Bash) EffectiveMode(c call.Context) modes.Mode {
	m := b.o.Executor.Mode()
	if b.confines && c.Agent != nil && b.o.Sessions != nil {
		if sm, ok := b.o.Sessions.SessionMode(c.Agent.Session); ok {
			m = sm
		}
	}
	return m
}

// Value is the canonical value of a successful call, for programmatic
// consumers: {"kind":"foreground", …RunResult} or {"kind":"background",
// "taskId":…}.
type Value struct {
	Kind   string `json:"kind"`
	TaskID string `json:"taskId,omitempty"`
	*executor.RunResult
}

// Call runs one bash call: decode and validate the arguments, resolve the
// mode (approved escalation > session override > executor default), ask the
// approver when escalating, then run in the foreground or start a
// background task. IsError is set only for validation, approval, abort and
// infrastructure failures; a non-zero exit is a result.
func (b *Bash) Call(ctx context.Context, c call.Context, raw json.RawMessage) call.Result {
	a, err := DecodeArgs(raw)
	if err != nil {
		return call.Error(err.Error())
	}
	if a.RunInBackground {
		if b.o.DisableBackground {
			return call.Error(errBackgroundDisabled)
		}
		if b.o.Tasks == nil {
			return call.Error(errBackgroundUnavailable)
		}
	}
	mode := b.EffectiveMode(c)
	req := executor.Request{Command: a.Command, Workdir: a.Workdir, TimeoutMs: a.TimeoutMs, Mode: &mode}
	if !a.RunInBackground {
		req.Output = c.Output
	}
	if c.Agent != nil {
		req.Session = &executor.Session{ID: c.Agent.Session, Workspace: c.Agent.Workspace}
	}
	if b.o.Transaction != nil {
		if tx := b.o.Transaction(c); tx != nil {
			// Checked before any approval is asked for.
			final := mode
			if a.Escalation != nil {
				final = *a.Escalation
			}
			if !final.Confines() {
				return call.Error(fmt.Sprintf(errTransactionUnconfined, final.String()))
			}
			req.Transaction = tx
		}
	}
	if a.Escalation != nil {
		granted, g, msg := b.escalate(ctx, c, a, req, mode)
		if msg != "" {
			return call.Error(msg)
		}
		mode, req.Grant = granted, g
	}
	if ctx.Err() != nil {
		return call.Error(errAborted) // nothing spawns after an abort
	}
	if b.o.Env != nil {
		type envResult struct {
			env map[string]string
			err error
		}
		got, ok := await(ctx, func() envResult {
			env, err := b.o.Env(ctx, c, a.RunInBackground)
			return envResult{env, err}
		})
		if !ok {
			return call.Error(errAborted)
		}
		if got.err != nil {
			return call.Error(got.err.Error())
		}
		req.DshEnv = got.env
	}
	if a.RunInBackground {
		return b.background(c, a, req, mode)
	}
	res, err := b.o.Executor.Run(ctx, req)
	if err != nil {
		if errors.Is(err, executor.ErrAborted) {
			return call.Error(errAborted)
		}
		return call.Error(err.Error())
	}
	if c.Agent != nil && b.confines {
		b.denied.record(c.Agent.Session, a.Command, res.Sandbox)
	}
	return call.Result{Text: RenderForeground(res, b.confines), Value: Value{Kind: "foreground", RunResult: res}}
}

// escalate checks and asks for an escalation of req (which runs under
// current without it); it returns the granted mode (with, when the
// approver chose them instead, the narrow grants the last run's denials
// suggested, in the current mode), or the error message refusing the call.
func (b *Bash) escalate(ctx context.Context, c call.Context, a Args, req executor.Request, current modes.Mode) (modes.Mode, *executor.Grant, string) {
	want := *a.Escalation
	switch {
	case !b.confines:
		return 0, nil, errNoEscalation
	case !want.StrictlyWider(current):
		return 0, nil, fmt.Sprintf("sandbox escalation to %q is not strictly wider than this call's current %q mode", want.String(), current.String())
	case b.o.Approver == nil:
		return 0, nil, fmt.Sprintf("sandbox escalation to %q requires approval, but no approval service is composed", want.String())
	case c.Agent == nil:
		return 0, nil, fmt.Sprintf("sandbox escalation to %q requires approval, but the call has no agent to route it through", want.String())
	}
	workdir := a.Workdir
	if r, err := b.o.Executor.Resolve(req); err == nil {
		workdir = r.Workdir
	}
	denials := b.denied.take(c.Agent.Session, a.Command)
	grants := grantsOf(denials)
	outcome, ok := approve(ctx, b.o.Approver, ApprovalRequest{
		Agent:         c.Agent,
		Tool:          Name,
		CallID:        c.ID,
		Reason:        fmt.Sprintf("escalate sandbox to %s: %s", want, a.Justification),
		Command:       a.Command,
		Description:   a.Description,
		Workdir:       workdir,
		Current:       current,
		Requested:     want,
		Justification: a.Justification,
		Denials:       denials,
		Grants:        grants,
	})
	if !ok {
		return 0, nil, errAborted
	}
	switch {
	case outcome == AllowedOnce:
		return want, nil, ""
	case outcome == AllowedGrants && len(grants) > 0:
		return current, grant(grants), ""
	case outcome == Rejected:
		return 0, nil, fmt.Sprintf("the user rejected escalating this command to %q", want.String())
	case outcome == Cancelled:
		return 0, nil, fmt.Sprintf("approval for escalating to %q was cancelled", want.String())
	default:
		return 0, nil, fmt.Sprintf("sandbox escalation to %q requires approval, but no approval channel is available", want.String())
	}
}

// approve asks the approver, and stops waiting when ctx is done (ok false).
func approve(ctx context.Context, ap Approver, r ApprovalRequest) (ApprovalOutcome, bool) {
	return await(ctx, func() ApprovalOutcome { return ap.Approve(ctx, r) })
}

// await runs a harness-supplied hook and waits for it or for ctx, whichever
// comes first: a hook that ignores the abort cannot hold the call (ok is
// false then; an answer that arrives later is dropped, never applied).
func await[T any](ctx context.Context, hook func() T) (v T, ok bool) {
	if ctx.Err() != nil {
		return v, false
	}
	answer := make(chan T, 1)
	go func() { answer <- hook() }()
	select {
	case v = <-answer:
		return v, ctx.Err() == nil
	case <-ctx.Done():
		return v, false
	}
}

// background starts a background task: the runtime checks the owner's limit
// before anything spawns.
func (b *Bash) background(c call.Context, a Args, req executor.Request, mode modes.Mode) call.Result {
	id, err := b.o.Tasks.Start(c.Owner(), TaskKind, a.Description, func(string) (tasks.Handle, error) {
		p, err := b.o.Executor.Start(b.bgCtx, req)
		if err != nil {
			return nil, err
		}
		return newTaskHandle(p, b.confines), nil
	})
	if err != nil {
		return call.Error(err.Error())
	}
	return call.Result{Text: "started background task " + id, Value: Value{Kind: "background", TaskID: id}}
}
