//go:build !linux

package executor

// Off Linux the package compiles so that a cross-platform harness can link
// it, but nothing runs: New returns sandbox.ErrUnsupported.

import (
	"context"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Executor runs shell commands under a sandbox mode. Off Linux New
// never returns one.
type Executor struct{}

// New returns sandbox.ErrUnsupported off Linux.
func New(Config) (*Executor, error) { return nil, sandbox.ErrUnsupported }

// Mode is read-only: off Linux no Executor exists.
func (e *Executor) Mode() modes.Mode { return modes.ReadOnly }

// Network is false: off Linux no Executor exists.
func (e *Executor) Network() bool { return false }

// Allowlist is nil: off Linux no Executor exists.
func (e *Executor) Allowlist() *modes.Allowlist { return nil }

// Workspace is "": off Linux no Executor exists.
func (e *Executor) Workspace() string { return "" }

// SpillDir is "": off Linux no Executor exists.
func (e *Executor) SpillDir() string { return "" }

// Close does nothing off Linux.
func (e *Executor) Close() error { return nil }

// Resolve returns ErrUnsupported off Linux.
func (e *Executor) Resolve(Request) (Resolved, error) { return Resolved{}, sandbox.ErrUnsupported }

// Run returns ErrUnsupported off Linux: nothing runs.
func (e *Executor) Run(context.Context, Request) (*RunResult, error) {
	return nil, sandbox.ErrUnsupported
}

// Start returns ErrUnsupported off Linux: nothing runs.
func (e *Executor) Start(context.Context, Request) (*Process, error) {
	return nil, sandbox.ErrUnsupported
}

// Process is a background command started by Executor.Start; off Linux
// there is none.
type Process struct{}

// Pid is 0 off Linux.
func (p *Process) Pid() int { return 0 }

// Resolved is empty off Linux.
func (p *Process) Resolved() Resolved { return Resolved{} }

// Status is StatusExited off Linux.
func (p *Process) Status() Status { return StatusExited }

// Read returns nothing off Linux.
func (p *Process) Read() Delta { return Delta{} }

// Done is closed off Linux.
func (p *Process) Done() <-chan struct{} { return closedChan }

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Wait returns ErrUnsupported off Linux.
func (p *Process) Wait(context.Context) (*RunResult, error) { return nil, sandbox.ErrUnsupported }

// Result is nil off Linux.
func (p *Process) Result() *RunResult { return nil }

// Kill reports false off Linux: nothing runs.
func (p *Process) Kill() bool { return false }

// OnSettled never calls f off Linux: no process settles.
func (p *Process) OnSettled(func(*RunResult)) {}
