//go:build linux

package executor

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func newTestExecutor(t *testing.T, cfg Config) *Executor {
	t.Helper()
	if cfg.Workspace == "" {
		cfg.Workspace = t.TempDir()
	}
	if cfg.SpillDir == "" {
		cfg.SpillDir = t.TempDir()
	}
	e, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	return e
}

func ptr[T any](v T) *T { return &v }

func TestNewExecutorDefaults(t *testing.T) {
	e := newTestExecutor(t, Config{})
	assert.Equal(t, modes.ReadOnly, e.Mode(), "read-only is the fail-safe default")
	assert.Equal(t, DefaultTimeout, e.cfg.DefaultTimeout)
	assert.Equal(t, DefaultMaxTimeout, e.cfg.MaxTimeout)
	assert.Equal(t, 64000, e.cfg.TailBytes)
	assert.Equal(t, int64(64<<20), e.cfg.SpillCap)
	assert.Equal(t, 3*time.Second, e.cfg.KillGrace)
	fi, err := os.Stat(e.SpillDir())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "the spill directory is private")
}

func TestNewExecutorRejects(t *testing.T) {
	ws := t.TempDir()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"mode", Config{Mode: modes.Mode(7)}, "unknown sandbox mode 7"},
		{"workspace", Config{Workspace: filepath.Join(ws, "missing")}, "cannot open workspace"},
		{"writable root", Config{AllowWrite: []string{filepath.Join(ws, "nope")}}, "cannot use writable root"},
		{"negative timeout", Config{DefaultTimeout: -time.Second}, "DefaultTimeout must be positive"},
		{"default above max", Config{DefaultTimeout: time.Hour, MaxTimeout: time.Minute}, "exceeds MaxTimeout"},
		{"shell", Config{Shell: "/nonexistent/bash"}, ""},
		{"shell not in PATH", Config{Shell: "no-such-shell-dsh"}, "cannot find the shell"},
		{"spill dir", Config{SpillDir: filepath.Join(ws, "missing")}, "cannot create the spill directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.Workspace == "" {
				tt.cfg.Workspace = ws
			}
			_, err := New(tt.cfg)
			if tt.name == "shell" {
				// An absolute shell is taken as given; it fails at spawn.
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestResolve(t *testing.T) {
	ws := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(ws, "sub"), 0o755))
	sessWS := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(sessWS, "pkg"), 0o755))
	wsC, _ := filepath.EvalSymlinks(ws)
	e := newTestExecutor(t, Config{Mode: modes.WorkspaceWrite, Workspace: ws, MaxTimeout: 10 * time.Second, DefaultTimeout: 2 * time.Second})
	sess := &Session{ID: "s1", Workspace: sessWS}
	link := filepath.Join(t.TempDir(), "ws-link")
	require.NoError(t, os.Symlink(sessWS, link))
	viaLink := &Session{ID: "s2", Workspace: link}

	tests := []struct {
		name      string
		req       Request
		workdir   string
		timeoutMs float64
		mode      modes.Mode
		policyWS  string
	}{
		{"defaults", Request{Command: "true"}, wsC, 2000, modes.WorkspaceWrite, wsC},
		{"relative to the executor workspace", Request{Command: "true", Workdir: "sub"}, filepath.Join(wsC, "sub"), 2000, modes.WorkspaceWrite, wsC},
		{"session workspace is the default", Request{Command: "true", Session: sess}, sessWS, 2000, modes.WorkspaceWrite, sessWS},
		{"relative to the session", Request{Command: "true", Session: sess, Workdir: "pkg"}, filepath.Join(sessWS, "pkg"), 2000, modes.WorkspaceWrite, sessWS},
		{"a symlinked session workspace resolves to its target", Request{Command: "true", Session: viaLink, Workdir: "pkg"}, filepath.Join(sessWS, "pkg"), 2000, modes.WorkspaceWrite, sessWS},
		{"explicit wins", Request{Command: "true", Session: sess, Workdir: ws}, ws, 2000, modes.WorkspaceWrite, sessWS},
		{"timeout given", Request{Command: "true", TimeoutMs: ptr(1500.5)}, wsC, 1500.5, modes.WorkspaceWrite, wsC},
		{"timeout capped", Request{Command: "true", TimeoutMs: ptr(1e12)}, wsC, 10000, modes.WorkspaceWrite, wsC},
		{"mode given", Request{Command: "true", Mode: ptr(modes.ReadOnly)}, wsC, 2000, modes.ReadOnly, wsC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := e.Resolve(tt.req)
			require.NoError(t, err)
			assert.Equal(t, tt.workdir, r.Workdir)
			assert.Equal(t, tt.timeoutMs, r.TimeoutMs)
			assert.Equal(t, time.Duration(tt.timeoutMs*float64(time.Millisecond)), r.Timeout)
			assert.Equal(t, tt.mode, r.Mode)
			assert.Equal(t, tt.mode, r.Policy.Mode)
			wantWS, _ := filepath.EvalSymlinks(tt.policyWS)
			assert.Equal(t, wantWS, r.Policy.Workspace)
			assert.Equal(t, 64000, r.StdoutTail)
		})
	}
}

func TestResolveProtectsSpillDir(t *testing.T) {
	e := newTestExecutor(t, Config{Mode: modes.WorkspaceWrite, SpillDir: "/tmp"})
	r, err := e.Resolve(Request{Command: "true"})
	require.NoError(t, err)
	assert.True(t, r.Policy.Protects(e.SpillDir()), "commands may not tamper with spill files")
	assert.False(t, r.Policy.Writable(filepath.Join(e.SpillDir(), "x.log")))
}

func TestResolveRejects(t *testing.T) {
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "file"), nil, 0o644))
	e := newTestExecutor(t, Config{Workspace: ws})
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"empty command", Request{}, "command must be a non-empty string"},
		{"blank command", Request{Command: " \n\t"}, "command must be a non-empty string"},
		{"NUL", Request{Command: "echo \x00"}, "NUL"},
		{"zero timeout", Request{Command: "true", TimeoutMs: ptr(0.0)}, "got 0"},
		{"negative timeout", Request{Command: "true", TimeoutMs: ptr(-5.0)}, "got -5"},
		{"NaN timeout", Request{Command: "true", TimeoutMs: ptr(math.NaN())}, "got NaN"},
		{"infinite timeout", Request{Command: "true", TimeoutMs: ptr(math.Inf(1))}, "got +Inf"},
		{"missing workdir", Request{Command: "true", Workdir: "nope"}, "no such file or directory"},
		{"workdir is a file", Request{Command: "true", Workdir: "file"}, "is not a directory"},
		{"relative session workspace", Request{Command: "true", Session: &Session{Workspace: "rel"}}, "not absolute"},
		{"mode", Request{Command: "true", Mode: ptr(modes.Mode(9))}, "unknown sandbox mode 9"},
		{"env name", Request{Command: "true", Env: map[string]string{"A=B": "x"}}, `"A=B"`},
		{"env value", Request{Command: "true", DshEnv: map[string]string{"DSH_X": "a\x00b"}}, `"DSH_X"`},
		{"stdout cap", Request{Command: "true", StdoutMaxBytes: -1}, "StdoutMaxBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Resolve(tt.req)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidRequest)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestResolveStdoutMaxBytesRaisesStdoutOnly(t *testing.T) {
	e := newTestExecutor(t, Config{})
	r, err := e.Resolve(Request{Command: "true", StdoutMaxBytes: 1 << 20})
	require.NoError(t, err)
	assert.Equal(t, 1<<20, r.StdoutTail)
	assert.Equal(t, 64000, r.StderrTail)
	r, err = e.Resolve(Request{Command: "true", StdoutMaxBytes: 10})
	require.NoError(t, err)
	assert.Equal(t, 64000, r.StdoutTail, "it raises, never lowers")
}

func TestResolveEnv(t *testing.T) {
	e := newTestExecutor(t, Config{Environ: func() []string {
		return []string{"PATH=/bin", "API_KEY=k", "DSH_HOME=/x", "TMPDIR=/var/tmp"}
	}})
	r, err := e.Resolve(Request{Command: "true", Env: map[string]string{"A": "1"}, DshEnv: map[string]string{"DSH_SHELL": "1"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"A=1", "DSH_SHELL=1", "GIT_PAGER=cat", "NO_COLOR=1", "PAGER=cat", "PATH=/bin", "TERM=dumb", "TMPDIR=/var/tmp"}, r.Env)
}

func TestSandboxUnavailableErrorMessage(t *testing.T) {
	const base = `sandbox mode "read-only" is requested but no sandbox backend is usable on this host; ` +
		`refusing to run the command unconfined. Install bubblewrap or run a Landlock-enforcing kernel (Linux), ` +
		`ensure sandbox-exec is usable (macOS), or ensure the ACL restricted-token runner can start (Windows) ` +
		`— otherwise switch the consumer to danger-full-access.`
	setup := &sandbox.SetupError{Detail: "seccomp: load filter: Invalid argument"}
	tests := []struct {
		err  *SandboxUnavailableError
		want string
	}{
		{&SandboxUnavailableError{Mode: modes.ReadOnly}, base},
		{&SandboxUnavailableError{Mode: modes.ReadOnly, Detail: setup.Detail, Err: setup}, base + " Runner failure: seccomp: load filter: Invalid argument"},
		{&SandboxUnavailableError{Mode: modes.WorkspaceWrite}, strings.Replace(base, `"read-only"`, `"workspace-write"`, 1)},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.err.Error())
		assert.Equal(t, "SANDBOX_UNAVAILABLE", tt.err.Code())
		var wrapped error = tt.err
		var target *SandboxUnavailableError
		assert.True(t, errors.As(wrapped, &target))
	}
	var se *sandbox.SetupError
	assert.True(t, errors.As(&SandboxUnavailableError{Err: setup}, &se), "the runner's setup error stays reachable")
}

func TestRunClassification(t *testing.T) {
	ws := t.TempDir()
	missing := filepath.Join(ws, "no-such-runner")
	marker := filepath.Join(ws, "ran")
	e := newTestExecutor(t, Config{Mode: modes.WorkspaceWrite, Workspace: ws, Runner: missing, KillGrace: testtime.Scale(200 * time.Millisecond)})
	ctx := context.Background()

	// A confined mode whose runner cannot start: refused, never run.
	_, err := e.Run(ctx, Request{Command: "touch " + marker})
	var su *SandboxUnavailableError
	require.ErrorAs(t, err, &su)
	assert.Equal(t, modes.WorkspaceWrite, su.Mode)
	assert.Contains(t, su.Error(), " Runner failure: cannot start the runner "+missing)
	assert.NoFileExists(t, marker)

	// danger-full-access needs no runner.
	res, err := e.Run(ctx, Request{Command: "touch " + marker + "; exit 125", Mode: ptr(modes.DangerFullAccess)})
	require.NoError(t, err, "exit 125 of the command itself is a result")
	assert.Equal(t, 125, res.ExitCode)
	assert.False(t, res.Sandbox.RunnerFailed)
	assert.Equal(t, "none", res.Sandbox.Enforcement.Level)
	assert.FileExists(t, marker)

	// An aborted context spawns nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = e.Run(cctx, Request{Command: "touch " + marker + ".2", Mode: ptr(modes.DangerFullAccess)})
	assert.ErrorIs(t, err, ErrAborted)
	assert.ErrorIs(t, err, context.Canceled)
	assert.NoFileExists(t, marker+".2")
}

func TestRunShellExecError(t *testing.T) {
	ws := t.TempDir()
	e := newTestExecutor(t, Config{Mode: modes.DangerFullAccess, Workspace: ws, Shell: filepath.Join(ws, "nosh")})
	_, err := e.Run(context.Background(), Request{Command: "true"})
	var ee *sandbox.ExecError
	require.ErrorAs(t, err, &ee)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, ee.Detail, "nosh: No such file or directory")
}

func TestClosedExecutor(t *testing.T) {
	e := newTestExecutor(t, Config{Mode: modes.DangerFullAccess})
	require.NoError(t, e.Close())
	_, err := e.Run(context.Background(), Request{Command: "true"})
	assert.ErrorIs(t, err, ErrClosed)
}
