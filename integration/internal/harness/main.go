//go:build linux

// Command harness drives a executor.Executor from a JSON spec, so that the
// integration suite can run the executor on the real kernel as root and as an
// unprivileged user, and can kill the process that hosts it. It is its own
// sandbox runner (it links package sandbox).
//
//	harness [-spec FILE | -spec-fd N] < spec.json
//
// The spec is a harnessproto.Spec: an executor Config, then one action.
//
//	run         Run Request (cancelling its context after abort_after_ms
//	            when set) and print an Output with its result and error.
//	start       Start Request in the background; Kill it after kill_after_ms
//	            or once its stdout contains kill_on; cancel its context after
//	            abort_after_ms; Read a Delta every read_every_ms (and once at
//	            the end); with stop_on_settled, Kill it and cancel its
//	            context from OnSettled; print the final result and the deltas.
//	concurrent  Run every request of Requests in parallel; print their
//	            outcomes in order.
//	sequence    Run every request of Requests, one after another; print
//	            their outcomes in order.
//	hold        Start every request of Requests, wait until the stdout of
//	            each contains ready_on, print one line "READY <json>" with the
//	            runner pids, then block forever (the test SIGKILLs us), or
//	            exit at once with exit_after_ready.
//
// With nofile_headroom set, the soft RLIMIT_NOFILE is lowered before the
// action to the descriptors open then plus that many.
//
// With arm_on (start: the command's stdout contains it) or arm_file (run and
// start: that file exists) set, abort_after_ms and kill_after_ms count from
// the moment the command got there instead of from the call. The outcome
// says when (armed_at_ms), and when the context was cancelled (abort_at_ms)
// and Kill called (kill_at_ms), all in ms from the same start as
// elapsed_ms.
//
// With survivors_of set, after the action the harness waits up to 2 s (times
// time_scale, like hold's 15 s) for no process whose command line contains
// that string to remain, and reports those still there. Every Output reports
// the harness's pid, its memory (VmRSS before the action, VmHWM after it)
// and its environment before and after the action.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/integration/internal/harnessproto"
	"github.com/dsh-sandbox/dsh-sandbox/integration/internal/procscan"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func main() {
	specPath := flag.String("spec", "", "read the spec from this file instead of stdin")
	specFD := flag.Int("spec-fd", -1, "read the spec from this inherited descriptor instead of stdin")
	flag.Parse()
	var in io.Reader = os.Stdin
	switch {
	case *specFD >= 0:
		f := os.NewFile(uintptr(*specFD), "spec")
		defer f.Close()
		in = f
	case *specPath != "":
		f, err := os.Open(*specPath)
		if err != nil {
			fatal(err)
		}
		defer f.Close()
		in = f
	}
	var spec harnessproto.Spec
	dec := json.NewDecoder(in)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		fatal(fmt.Errorf("bad spec: %w", err))
	}

	out := harnessproto.Output{Pid: os.Getpid(), EnvBefore: os.Environ(), Survivors: []string{}}
	e, err := newExecutor(spec.Config)
	if err != nil {
		out.NewExecErr, out.EnvAfter = err.Error(), os.Environ()
		emit(out)
		return
	}
	out.SpillDir, out.Workspace = e.SpillDir(), e.Workspace()

	out.RSSBeforeKB = procStatusKB("VmRSS")
	if spec.NofileHeadroom != nil {
		lowerNofile(*spec.NofileHeadroom)
	}
	switch spec.Action {
	case "run":
		out.Outcome = run(e, spec.Request, spec)
	case "start":
		out.Outcome = start(e, spec)
	case "concurrent":
		out.Results = make([]harnessproto.Outcome, len(spec.Requests))
		var wg sync.WaitGroup
		for i, r := range spec.Requests {
			wg.Go(func() { out.Results[i] = run(e, r, spec) })
		}
		wg.Wait()
	case "sequence":
		for _, r := range spec.Requests {
			out.Results = append(out.Results, run(e, r, spec))
		}
	case "hold":
		hold(e, spec)
	default:
		fatal(fmt.Errorf("unknown action %q", spec.Action))
	}
	out.HWMAfterKB = procStatusKB("VmHWM")
	out.EnvAfter = os.Environ()
	if spec.SurvivorsOf != "" {
		deadline := time.Now().Add(scaled(spec, 2*time.Second))
		for {
			out.Survivors = procscan.WithCmdline(spec.SurvivorsOf)
			if len(out.Survivors) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := e.Close(); err != nil {
		out.CloseErr = err.Error()
	}
	emit(out)
}

func newExecutor(c harnessproto.Config) (*executor.Executor, error) {
	cfg := executor.Config{
		Workspace: c.Workspace,
		KillGrace: time.Duration(c.KillGraceMs) * time.Millisecond,
		TailBytes: c.TailBytes,
		SpillCap:  c.SpillCap,
		Runner:    c.Runner,
		SpillDir:  c.SpillDir,
		Network:   c.Network,
		Shell:     c.Shell,
	}
	if c.Mode != "" {
		m, err := modes.Parse(c.Mode)
		if err != nil {
			return nil, err
		}
		cfg.Mode = m
	}
	return executor.New(cfg)
}

func request(r harnessproto.Request) (executor.Request, error) {
	req := executor.Request{
		Command:        r.Command,
		Workdir:        r.Workdir,
		TimeoutMs:      r.TimeoutMs,
		Env:            r.Env,
		DshEnv:         r.DshEnv,
		StdoutMaxBytes: r.StdoutMaxBytes,
	}
	if r.Mode != "" {
		m, err := modes.Parse(r.Mode)
		if err != nil {
			return req, err
		}
		req.Mode = &m
	}
	if r.Session != nil {
		req.Session = &executor.Session{ID: r.Session.ID, Workspace: r.Session.Workspace}
	}
	if r.Stdin != nil {
		req.Stdin = strings.NewReader(*r.Stdin)
	}
	return req, nil
}

func run(e *executor.Executor, r harnessproto.Request, spec harnessproto.Spec) harnessproto.Outcome {
	req, err := request(r)
	if err != nil {
		fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var c clock
	c.t0 = time.Now() // before the abort timer: elapsed >= abort + grace
	ended := make(chan struct{})
	var armer sync.WaitGroup
	if spec.AbortAfterMs > 0 {
		abort := func() {
			time.AfterFunc(time.Duration(spec.AbortAfterMs)*time.Millisecond, func() {
				select {
				case <-ended: // too late: Run returned
				default:
					c.mark(&c.abortAt)
					cancel()
				}
			})
		}
		if spec.ArmFile == "" {
			abort()
		} else {
			armer.Go(func() {
				if waitFile(spec.ArmFile, ended) {
					c.mark(&c.armedAt)
					abort()
				}
			})
		}
	}
	res, err := e.Run(ctx, req)
	elapsed := time.Since(c.t0)
	close(ended)
	armer.Wait()
	o := harnessproto.Outcome{Result: res, Error: classify(err), ElapsedMs: ms(elapsed)}
	c.report(&o)
	return o
}

// clock records, from t0, when the arm marker was seen, the context
// cancelled and Kill called (timer goroutines write, the action reads).
type clock struct {
	t0                       time.Time
	mu                       sync.Mutex
	armedAt, abortAt, killAt time.Duration
}

func (c *clock) mark(at *time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *at == 0 {
		*at = max(time.Since(c.t0), time.Nanosecond)
	}
}

func (c *clock) report(o *harnessproto.Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o.ArmedAtMs, o.AbortAtMs, o.KillAtMs = ms(c.armedAt), ms(c.abortAt), ms(c.killAt)
}

// waitFile polls for path until it exists (true) or done is closed.
func waitFile(path string, done <-chan struct{}) bool {
	for {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		select {
		case <-done:
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func start(e *executor.Executor, spec harnessproto.Spec) harnessproto.Outcome {
	req, err := request(spec.Request)
	if err != nil {
		fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var c clock
	c.t0 = time.Now()
	p, err := e.Start(ctx, req)
	if err != nil {
		return harnessproto.Outcome{Error: classify(err), ElapsedMs: ms(time.Since(c.t0))}
	}
	var o harnessproto.Outcome
	if spec.StopOnSettled {
		p.OnSettled(func(*executor.RunResult) {
			k := p.Kill()
			o.KillInSettled = &k
			cancel()
		})
	}
	var killOnce sync.Once
	kill := func() {
		killOnce.Do(func() {
			c.mark(&c.killAt)
			o.KillCalled, o.KillReturned = true, p.Kill()
			o.StatusAfterKill = string(p.Status())
		})
	}
	var killTimer <-chan time.Time
	armed := false
	arm := func() {
		armed = true
		if spec.AbortAfterMs > 0 {
			time.AfterFunc(time.Duration(spec.AbortAfterMs)*time.Millisecond, func() {
				select {
				case <-p.Done(): // too late: the command ended
				default:
					c.mark(&c.abortAt)
					cancel()
				}
			})
		}
		if spec.KillAfterMs > 0 {
			killTimer = time.After(time.Duration(spec.KillAfterMs) * time.Millisecond)
		}
	}
	if spec.ArmOn == "" && spec.ArmFile == "" {
		arm()
	}
	every := time.Duration(spec.ReadEveryMs) * time.Millisecond
	if every <= 0 {
		every = 20 * time.Millisecond
	}
	reading := spec.ReadEveryMs > 0 || spec.KillOn != "" || spec.ArmOn != ""
	var seen strings.Builder
	read := func() {
		d := p.Read()
		if d.Stdout != "" || d.Stderr != "" || d.Lossy || len(d.SpillPaths) > 0 {
			o.Deltas = append(o.Deltas, d)
		}
		seen.WriteString(d.Stdout)
		if spec.KillOn != "" && strings.Contains(seen.String(), spec.KillOn) {
			kill()
		}
	}
	checkArm := func() {
		if armed {
			return
		}
		if spec.ArmOn != "" && !strings.Contains(seen.String(), spec.ArmOn) {
			return
		}
		if spec.ArmFile != "" {
			if _, err := os.Stat(spec.ArmFile); err != nil {
				return
			}
		}
		c.mark(&c.armedAt)
		arm()
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
loop:
	for {
		select {
		case <-p.Done():
			break loop
		case <-killTimer:
			kill()
		case <-tick.C:
			if reading {
				read()
			}
			checkArm()
		}
	}
	if reading {
		read()
	}
	res, werr := p.Wait(context.Background())
	o.Result, o.Error, o.ElapsedMs = res, classify(werr), ms(time.Since(c.t0))
	if p.Result() != res {
		fatal(errors.New("Process.Result differs from Process.Wait"))
	}
	again := p.Kill()
	o.KillAfterDone = &again
	o.StatusAtEnd = string(p.Status())
	c.report(&o)
	return o
}

func hold(e *executor.Executor, spec harnessproto.Spec) {
	ready := spec.ReadyOn
	if ready == "" {
		ready = "ready"
	}
	var pids []int
	for _, r := range spec.Requests {
		req, err := request(r)
		if err != nil {
			fatal(err)
		}
		p, err := e.Start(context.Background(), req)
		if err != nil {
			fatal(fmt.Errorf("start %q: %w", r.Command, err))
		}
		var seen strings.Builder
		deadline := time.Now().Add(scaled(spec, 15*time.Second))
		for !strings.Contains(seen.String(), ready) {
			if time.Now().After(deadline) {
				fatal(fmt.Errorf("%q never printed %q (stdout %q)", r.Command, ready, seen.String()))
			}
			select {
			case <-p.Done():
				fatal(fmt.Errorf("%q ended before it was ready: %+v", r.Command, p.Result()))
			case <-time.After(10 * time.Millisecond):
			}
			seen.WriteString(p.Read().Stdout)
		}
		pids = append(pids, p.Pid())
	}
	b, _ := json.Marshal(map[string]any{"pid": os.Getpid(), "runner_pids": pids})
	fmt.Printf("READY %s\n", b)
	os.Stdout.Sync()
	if spec.ExitAfterReady {
		os.Exit(0) // a host that ends without Close
	}
	select {}
}

func classify(err error) *harnessproto.ErrorInfo {
	if err == nil {
		return nil
	}
	info := &harnessproto.ErrorInfo{Text: err.Error()}
	var su *executor.SandboxUnavailableError
	if errors.As(err, &su) {
		info.SandboxUnavailable, info.Code = true, su.Code()
	}
	var ee *sandbox.ExecError
	info.ExecError = errors.As(err, &ee)
	info.NotExist = errors.Is(err, os.ErrNotExist)
	info.Aborted = errors.Is(err, executor.ErrAborted)
	info.Canceled = errors.Is(err, context.Canceled)
	info.Invalid = errors.Is(err, executor.ErrInvalidRequest)
	var re *sandbox.ResourceError
	info.Resource = errors.As(err, &re) && errors.Is(err, sandbox.ErrResourceExhausted)
	info.Closed = errors.Is(err, executor.ErrClosed)
	return info
}

// lowerNofile sets the soft RLIMIT_NOFILE to the open descriptors plus
// headroom (through package syscall, so that children inherit it).
func lowerNofile(headroom int) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		fatal(err)
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		fatal(err)
	}
	// ReadDir's own descriptor is closed again: it is not counted.
	rl.Cur = uint64(len(ents) - 1 + headroom)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		fatal(err)
	}
}

// procStatusKB returns a "kB" field of /proc/self/status.
func procStatusKB(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			v, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return v
		}
	}
	return -1
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// scaled multiplies one of the harness's own deadlines by the spec's
// time_scale (at least 1).
func scaled(spec harnessproto.Spec, d time.Duration) time.Duration {
	return time.Duration(float64(d) * max(spec.TimeScale, 1))
}

func emit(out harnessproto.Output) {
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "harness:", err)
	os.Exit(2)
}
