//go:build linux

package integration

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// In-process checks of the executor (this test binary is its own runner):
// what does not depend on the identity.

func newTestExecutor(t *testing.T, cfg executor.Config) *executor.Executor {
	t.Helper()
	if cfg.Workspace == "" {
		cfg.Workspace = canon(t, t.TempDir())
	}
	if cfg.SpillDir == "" {
		cfg.SpillDir = t.TempDir()
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = testtime.Scale(300 * time.Millisecond)
	}
	e, err := executor.New(cfg)
	if err != nil {
		t.Fatalf("executor.New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestExecutorInvalidRequests: requests Resolve refuses wrap ErrInvalidRequest,
// from Run and Start alike, and nothing runs.
func TestExecutorInvalidRequests(t *testing.T) {
	t.Parallel()
	e := newTestExecutor(t, executor.Config{Mode: modes.WorkspaceWrite})
	marker := filepath.Join(e.Workspace(), "ran")
	touch := "touch " + marker
	bad := modes.Mode(7)
	for name, req := range map[string]executor.Request{
		"timeout NaN":          {Command: touch, TimeoutMs: f64(math.NaN())},
		"timeout +Inf":         {Command: touch, TimeoutMs: f64(math.Inf(1))},
		"timeout -Inf":         {Command: touch, TimeoutMs: f64(math.Inf(-1))},
		"timeout 0":            {Command: touch, TimeoutMs: f64(0)},
		"timeout -1":           {Command: touch, TimeoutMs: f64(-1)},
		"empty command":        {Command: ""},
		"blank command":        {Command: " \t\n"},
		"NUL in command":       {Command: touch + "\x00x"},
		"missing workdir":      {Command: touch, Workdir: "no/such/dir"},
		"file as workdir":      {Command: touch, Workdir: "/etc/passwd"},
		"relative session ws":  {Command: touch, Session: &executor.Session{ID: "s", Workspace: "rel"}},
		"env name with =":      {Command: touch, Env: map[string]string{"A=B": "x"}},
		"empty env name":       {Command: touch, Env: map[string]string{"": "x"}},
		"NUL in env value":     {Command: touch, DshEnv: map[string]string{"DSH_X": "a\x00b"}},
		"negative stdout tail": {Command: touch, StdoutMaxBytes: -1},
		"unknown mode":         {Command: touch, Mode: &bad},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := e.Resolve(req); !errors.Is(err, executor.ErrInvalidRequest) {
				t.Errorf("Resolve: %v, want ErrInvalidRequest", err)
			}
			res, err := e.Run(context.Background(), req)
			if !errors.Is(err, executor.ErrInvalidRequest) || res != nil {
				t.Errorf("Run: %+v, %v, want no result and ErrInvalidRequest", res, err)
			}
			if p, err := e.Start(context.Background(), req); !errors.Is(err, executor.ErrInvalidRequest) || p != nil {
				t.Errorf("Start: %v, want ErrInvalidRequest", err)
			}
		})
	}
	requireAbsent(t, marker)
}

// TestExecutorConfigRefused: executor.New refuses configs it cannot honour.
func TestExecutorConfigRefused(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for name, cfg := range map[string]executor.Config{
		"shell not in PATH":       {Workspace: ws, Shell: "no-such-shell-dsh-it"},
		"negative kill grace":     {Workspace: ws, KillGrace: -time.Second},
		"default over max":        {Workspace: ws, DefaultTimeout: 2 * time.Second, MaxTimeout: time.Second},
		"missing workspace":       {Workspace: filepath.Join(ws, "nope")},
		"unknown mode":            {Workspace: ws, Mode: modes.Mode(9)},
		"negative tail":           {Workspace: ws, TailBytes: -1},
		"spill dir not creatable": {Workspace: ws, SpillDir: filepath.Join(ws, "no", "such")},
	} {
		t.Run(name, func(t *testing.T) {
			if e, err := executor.New(cfg); err == nil {
				e.Close()
				t.Errorf("executor.New accepted %+v", cfg)
			}
		})
	}
}

// TestExecutorCloseKillsAndRefuses: Close stops the live background commands
// (with their daemons) and later calls fail with ErrClosed.
func TestExecutorCloseKillsAndRefuses(t *testing.T) {
	t.Parallel()
	e := newTestExecutor(t, executor.Config{Mode: modes.WorkspaceWrite})
	n := taggedNonce(t)
	p, err := e.Start(context.Background(), executor.Request{Command: treeScript(n)})
	if err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	if err := pollCond(10*time.Second, func() bool {
		seen.WriteString(p.Read().Stdout)
		return strings.Contains(seen.String(), "ready")
	}); err != nil {
		t.Fatalf("never ready: %v (stdout %q)", err, seen.String())
	}
	var settled *executor.RunResult
	p.OnSettled(func(r *executor.RunResult) { settled = r })
	t0 := time.Now()
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(t0); d > testtime.Scale(5*time.Second) {
		t.Errorf("Close took %v", d)
	}
	r := p.Result()
	if r == nil || settled != r {
		t.Fatalf("after Close the process has result %+v (OnSettled got %+v), want a final one", r, settled)
	}
	if !r.Killed || p.Status() != executor.StatusExited {
		t.Errorf("killed=%v status=%s, want true exited", r.Killed, p.Status())
	}
	requireNoneLeft(t, n, 2*time.Second)
	if _, err := e.Run(context.Background(), executor.Request{Command: "true"}); !errors.Is(err, executor.ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
	if _, err := e.Start(context.Background(), executor.Request{Command: "true"}); !errors.Is(err, executor.ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
}

// TestExecutorCancelledBeforeStart: a Run whose context is already cancelled
// does not run the command and reports the abort.
func TestExecutorCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	e := newTestExecutor(t, executor.Config{Mode: modes.WorkspaceWrite})
	marker := filepath.Join(e.Workspace(), "ran")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.Run(ctx, executor.Request{Command: "touch " + marker})
	if !errors.Is(err, executor.ErrAborted) || !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a cancelled context: %v, want ErrAborted and context.Canceled", err)
	}
	requireAbsent(t, marker)
	if _, err := os.Stat(e.SpillDir()); err != nil {
		t.Errorf("spill directory: %v", err)
	}
}
