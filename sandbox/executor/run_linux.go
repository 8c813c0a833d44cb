//go:build linux

package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/internal/signame"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
)

// Why a command was stopped; the first cause wins.
type stopCause int

const (
	causeNone stopCause = iota
	causeTimeout
	causeAbort
	causeKill
)

// job is one running command: the sandboxed process, its collectors, and
// the lifecycle (timeout, abort, kill, drain, settle).
type job struct {
	e       *Executor
	r       Resolved
	cmd     *sandbox.Cmd
	out     *collector
	err     *collector
	readers sync.WaitGroup
	pipes   []*os.File // read ends, closed after the drain
	stdinW  *os.File

	mu       sync.Mutex
	cause    stopCause
	exited   bool // the command's status is known (see statusKnown)
	stopping bool
	result   *RunResult
	onSettle []func(*RunResult)

	exitedCh chan struct{} // closed when the command's status is known
	settled  chan struct{} // closed when the result is final
}

// launch resolves, spawns and supervises one command. background drops the
// timeout and uses the normal stdout tail.
func (e *Executor) launch(ctx context.Context, req Request, background bool) (*job, error) {
	r, err := e.Resolve(req)
	if err != nil {
		return nil, err
	}
	if background {
		r.StdoutTail = e.cfg.TailBytes
		r.Timeout, r.TimeoutMs = 0, 0
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAborted, context.Cause(ctx))
	}
	if e.isClosed() {
		return nil, ErrClosed
	}

	n := e.runSeq.Add(1)
	j := &job{
		e:        e,
		r:        r,
		out:      newCollector("stdout", r.StdoutTail, e.cfg.SpillCap, e.newSpill(n)),
		err:      newCollector("stderr", r.StderrTail, e.cfg.SpillCap, e.newSpill(n)),
		exitedCh: make(chan struct{}),
		settled:  make(chan struct{}),
	}
	if err := j.start(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	closed := e.closed
	if !closed {
		e.live[j] = struct{}{}
	}
	e.mu.Unlock()
	if closed {
		// Close ran while this command started: it must not outlive it.
		go j.supervise(nil)
		j.stop(causeKill)
		<-j.settled
		return nil, ErrClosed
	}

	var timer *time.Timer
	if !background {
		timer = time.AfterFunc(r.Timeout, func() { j.stop(causeTimeout) })
	}
	stopAbort := context.AfterFunc(ctx, func() { j.stop(causeAbort) })
	go func() {
		j.supervise(timer)
		stopAbort()
		e.mu.Lock()
		delete(e.live, j)
		e.mu.Unlock()
	}()
	return j, nil
}

// start creates the pipes and starts the sandboxed command.
func (j *job) start() error {
	var closeOnFail []*os.File
	fail := func(err error) error {
		for _, f := range closeOnFail {
			f.Close()
		}
		return err
	}
	outR, outW, err := pipe()
	if err != nil {
		return fail(err)
	}
	closeOnFail = append(closeOnFail, outR, outW)
	errR, errW, err := pipe()
	if err != nil {
		return fail(err)
	}
	closeOnFail = append(closeOnFail, errR, errW)
	var stdinR *os.File
	if j.r.Stdin != nil {
		if stdinR, j.stdinW, err = os.Pipe(); err != nil {
			return fail(spawnError("pipe", fmt.Errorf("sandbox: stdin pipe: %w", err)))
		}
		closeOnFail = append(closeOnFail, stdinR, j.stdinW)
	}
	// A command too long to be an argument is read from a memfd.
	script := j.r.Command
	var extra []*os.File
	if !commandFits(j.e.shell, j.r.Command, j.r.Env) {
		f, err := commandFile(j.r.Command)
		if err != nil {
			return fail(spawnError("memfd", fmt.Errorf("sandbox: %w", err)))
		}
		closeOnFail = append(closeOnFail, f)
		script, extra = longCommandScript, []*os.File{f}
	}

	cmd := &sandbox.Cmd{
		Policy:      j.r.Policy,
		Path:        j.e.shell,
		Args:        shellArgv(j.e.shell, script)[1:],
		Env:         j.r.Env,
		Dir:         j.r.Workdir,
		Stdin:       stdinR,
		Stdout:      outW,
		Stderr:      errW,
		ExtraFiles:  extra,
		Runner:      j.e.cfg.Runner,
		Proxy:       j.e.proxy,
		Transaction: j.r.Transaction,
		// The executor writes its spill files there during the run.
		AuditSkip:  []string{j.e.spillDir},
		AuditCache: &j.e.audit,
		Namespaces: &j.e.namespaces,
		Rulesets:   &j.e.rulesets,
	}
	if !j.r.Mode.Confines() {
		// No sandbox runner: the process-tree keeper is this very binary
		// (it links the runner), whatever runner is configured.
		cmd.Runner = ""
	}
	if err := cmd.Start(); err != nil {
		fail(nil)
		var se *sandbox.SetupError
		var re *sandbox.ResourceError
		switch {
		case errors.As(err, &re):
			return re
		case j.r.Mode.Confines() && errors.As(err, &se):
			return &SandboxUnavailableError{Mode: j.r.Mode, Detail: se.Detail, Err: err}
		}
		return fmt.Errorf("sandbox: cannot start the command: %w", err)
	}
	j.cmd = cmd
	outW.Close()
	errW.Close()
	for _, f := range extra {
		f.Close()
	}
	if stdinR != nil {
		stdinR.Close()
		go func() {
			io.Copy(j.stdinW, j.r.Stdin)
			j.stdinW.Close()
		}()
	}
	j.pipes = []*os.File{outR, errR}
	j.readers.Add(2)
	go j.drain(outR, j.out)
	go j.drain(errR, j.err)
	return nil
}

// spawnError is err, or a *ResourceError for op when err is running out of
// resources.
func spawnError(op string, err error) error {
	if re := sandbox.ResourceErrorOf(op, err); re != nil {
		return re
	}
	return err
}

// pipe returns a pipe for a command's output, enlarged for throughput.
func pipe() (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, spawnError("pipe", fmt.Errorf("sandbox: output pipe: %w", err))
	}
	// Best effort: fewer wake-ups for bulky output. The default 64 KiB
	// stays when the host refuses. (Through Control: r.Fd() would switch
	// the pipe to blocking mode and pin a thread per blocked read.)
	if rc, err := r.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) })
	}
	return r, w, nil
}

// readBuffers are shared by every drain: a buffer is taken only once the
// pipe is readable, so an idle background command holds none.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// drain copies a pipe into its collector until EOF, an error, or the read
// deadline set after the grace.
func (j *job) drain(r *os.File, c *collector) {
	defer j.readers.Done()
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	for {
		var buf *[]byte
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			buf = readBuffers.Get().(*[]byte)
			for n, rerr = unix.Read(int(fd), *buf); rerr == unix.EINTR; {
				n, rerr = unix.Read(int(fd), *buf)
			}
			if rerr == unix.EAGAIN {
				readBuffers.Put(buf)
				buf = nil
				return false // wait until readable
			}
			return true
		})
		if buf != nil {
			if n > 0 {
				c.Write((*buf)[:n])
				if j.r.Output != nil {
					j.r.Output((*buf)[:n])
				}
			}
			readBuffers.Put(buf)
		}
		if err != nil || rerr != nil || n <= 0 {
			return
		}
	}
}

// supervise waits for the command, drains its pipes for at most the grace,
// and settles the result.
func (j *job) supervise(timer *time.Timer) {
	// The status is known from the runner's exit message on (or the runner
	// is gone): from then on nothing stops the command any more.
	<-j.cmd.Exited()
	if timer != nil {
		timer.Stop()
	}
	j.mu.Lock()
	j.exited = true
	j.mu.Unlock()
	close(j.exitedCh)
	res, err := j.cmd.Wait()

	drained := make(chan struct{})
	go func() { j.readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(j.e.cfg.KillGrace):
		for _, p := range j.pipes {
			p.SetReadDeadline(time.Now())
		}
		<-drained
	}
	for _, p := range j.pipes {
		p.Close()
	}
	j.out.close()
	j.err.close()
	if j.stdinW != nil {
		j.stdinW.Close()
	}

	out := &RunResult{
		Stdout: j.out.output(),
		Stderr: j.err.output(),
		Sandbox: sandbox.Facts{
			Mode:    j.r.Mode,
			Denials: []sandbox.Denial{},
			Changes: []sandbox.Change{},
		},
	}
	if err != nil {
		out.Sandbox.RunnerFailed, out.Sandbox.RunnerFailure = true, err.Error()
		out.ExitCode = 125 // status unknown: the sandbox's own failure code
	} else {
		out.Sandbox = res.Facts
		out.ExitCode = res.ExitCode
		if res.Signal != 0 {
			out.Signal = signame.Name(res.Signal)
		}
	}
	if out.Sandbox.Enforcement.Level == "" {
		out.Sandbox.Enforcement = j.cmd.Enforcement()
	}

	j.mu.Lock()
	switch j.cause {
	case causeTimeout:
		out.TimedOut = true
	case causeAbort:
		out.Aborted = true
	case causeKill:
		out.Killed = true
	}
	out.TimeoutMs = j.r.TimeoutMs
	j.result = out
	callbacks := j.onSettle
	j.onSettle = nil
	j.mu.Unlock()
	// Callbacks run before Done closes: whoever waits sees their effects.
	for _, f := range callbacks {
		f(out)
	}
	close(j.settled)
}

// stop terminates the command for cause: SIGTERM to its process group,
// SIGKILL to the whole tree after the grace. Only the first cause counts,
// and none once the command ended.
func (j *job) stop(cause stopCause) {
	j.mu.Lock()
	if j.statusKnown() || j.stopping {
		j.mu.Unlock()
		return
	}
	j.stopping = true
	j.cause = cause
	j.mu.Unlock()
	j.cmd.Signal(syscall.SIGTERM)
	go func() {
		select {
		case <-j.exitedCh:
		case <-time.After(j.e.cfg.KillGrace):
			j.cmd.Kill()
		}
	}()
}

// statusKnown reports whether the command's status is known: the runner
// reported it (even if supervise has not noticed yet), or the runner is
// gone. j.mu is held.
func (j *job) statusKnown() bool {
	if !j.exited {
		select {
		case <-j.cmd.Exited():
			j.exited = true
		default:
		}
	}
	return j.exited
}

// Run runs a command in the foreground and returns its result. A non-zero
// exit is a result, not an error. Errors: invalid requests (wrapping
// ErrInvalidRequest), a *SandboxUnavailableError when a confined mode could
// not be enforced (the command never ran), an *ExecError when the shell
// could not be executed, and — when ctx is cancelled while the command runs
// — the result together with an error wrapping ErrAborted and the context's
// error. The timeout and the abort are exclusive: the first cause wins.
func (e *Executor) Run(ctx context.Context, req Request) (*RunResult, error) {
	j, err := e.launch(ctx, req, false)
	if err != nil {
		return nil, err
	}
	<-j.settled
	if j.result.Aborted {
		return j.result, fmt.Errorf("%w: %w", ErrAborted, context.Cause(ctx))
	}
	return j.result, nil
}

// Start starts a command in the background and returns its handle. No
// timeout applies; cancelling ctx kills it like Process.Kill (the result
// then reports Aborted). Errors are those of Run, before anything ran.
func (e *Executor) Start(ctx context.Context, req Request) (*Process, error) {
	j, err := e.launch(ctx, req, true)
	if err != nil {
		return nil, err
	}
	return &Process{j: j}, nil
}

// Process is a background command started by Executor.Start.
type Process struct {
	j *job
}

// Pid is the process id of the command's runner.
func (p *Process) Pid() int { return p.j.cmd.Pid() }

// Resolved is what was spawned.
func (p *Process) Resolved() Resolved { return p.j.r }

// Status reports whether the process runs, is being stopped, or has ended.
func (p *Process) Status() Status {
	p.j.mu.Lock()
	defer p.j.mu.Unlock()
	if p.j.result != nil {
		return StatusExited
	}
	if p.j.stopping {
		return StatusStopping
	}
	return StatusRunning
}

// Read consumes the output written since the previous Read.
func (p *Process) Read() Delta {
	var d Delta
	var outLossy, errLossy bool
	var outSpill, errSpill string
	d.Stdout, outLossy, outSpill = p.j.out.consume()
	d.Stderr, errLossy, errSpill = p.j.err.consume()
	d.Lossy = outLossy || errLossy
	if d.Lossy {
		for _, s := range []string{outSpill, errSpill} {
			if s != "" {
				d.SpillPaths = append(d.SpillPaths, s)
			}
		}
	}
	return d
}

// Done is closed when the process has ended and its result is final.
func (p *Process) Done() <-chan struct{} { return p.j.settled }

// Wait waits for the process to end, or for ctx; cancelling ctx stops the
// wait, not the process.
func (p *Process) Wait(ctx context.Context) (*RunResult, error) {
	select {
	case <-p.j.settled:
		return p.j.result, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// Result returns the final result, or nil while the process runs.
func (p *Process) Result() *RunResult {
	p.j.mu.Lock()
	defer p.j.mu.Unlock()
	return p.j.result
}

// Kill stops the process: SIGTERM to its process group, SIGKILL to the whole
// tree after the grace. It returns at once; Wait or Done tell when it ended.
// It reports false when the process had already ended.
func (p *Process) Kill() bool {
	p.j.mu.Lock()
	ended := p.j.statusKnown()
	p.j.mu.Unlock()
	if ended {
		return false
	}
	p.j.stop(causeKill)
	return true
}

// OnSettled calls f with the final result once the process has ended (at
// once, in this goroutine, when it already has). Callbacks run before Done
// is closed; f must not block or wait for the process.
func (p *Process) OnSettled(f func(*RunResult)) {
	p.j.mu.Lock()
	if p.j.result == nil {
		p.j.onSettle = append(p.j.onSettle, f)
		p.j.mu.Unlock()
		return
	}
	res := p.j.result
	p.j.mu.Unlock()
	f(res)
}
