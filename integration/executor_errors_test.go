//go:build linux

package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/integration/internal/harnessproto"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
)

const unavailableWorkspaceWrite = `sandbox mode "workspace-write" is requested but no sandbox backend is usable on this host; ` +
	`refusing to run the command unconfined. Install bubblewrap or run a Landlock-enforcing kernel (Linux), ` +
	`ensure sandbox-exec is usable (macOS), or ensure the ACL restricted-token runner can start (Windows) ` +
	`— otherwise switch the consumer to danger-full-access.`

// TestExecutorRunnerUnusable: a runner that is missing, not executable or a
// directory makes a confined call fail closed with the contract's
// SandboxUnavailableError, foreground and background, and the command never
// runs; danger-full-access needs no runner and still runs.
func TestExecutorRunnerUnusable(t *testing.T) {
	t.Parallel()
	forEachIdentity(t, func(t *testing.T, id identity) {
		dir := id.mkdirOwned(t, "/tmp", "dsh-it-runner-")
		plain := filepath.Join(dir, "runner-0644")
		id.writeOwned(t, plain, "#!/bin/sh\nexit 0\n", 0o644)
		var cases []hCase
		var markers [][]string
		for _, runner := range []struct{ name, path string }{
			{"missing", filepath.Join(dir, "no-such-runner")},
			{"mode-0644", plain},
			{"directory", dir},
		} {
			for _, action := range []string{"run", "start"} {
				cfg := id.execConfig(t, "workspace-write")
				cfg.Runner = runner.path
				m := []string{filepath.Join(cfg.Workspace, "ww"), filepath.Join(cfg.Workspace, "ro"), filepath.Join(cfg.Workspace, "dfa")}
				markers = append(markers, m)
				spec := harnessproto.Spec{Config: cfg, Action: "concurrent", Requests: []harnessproto.Request{
					{Command: fmt.Sprintf("touch %q", m[0])},
					{Command: fmt.Sprintf("touch %q", m[1]), Mode: "read-only"},
					{Command: fmt.Sprintf("touch %q", m[2]), Mode: "danger-full-access"},
				}}
				if action == "start" {
					spec = harnessproto.Spec{Config: cfg, Action: "start", Request: spec.Requests[0]}
				}
				cases = append(cases, hCase{name: runner.name + "/" + action, spec: spec})
			}
		}
		outs := id.harnessAll(t, cases)
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				out, m := outs[i], markers[i]
				results := out.Results
				if strings.HasSuffix(c.name, "/start") {
					results = []harnessproto.Outcome{out.Outcome}
				}
				for k, res := range results {
					mode := []string{"workspace-write", "read-only", "danger-full-access"}[k]
					if mode == "danger-full-access" {
						r := requireResult(t, res)
						requireConfined(t, r, mode)
						if r.ExitCode != 0 {
							t.Errorf("danger-full-access: exit %d", r.ExitCode)
						}
						if !exists(m[k]) {
							t.Errorf("danger-full-access did not run with an unusable runner: %s absent", m[k])
						}
						continue
					}
					e := res.Error
					if e == nil || res.Result != nil {
						t.Errorf("%s: result %+v error %+v, want a SandboxUnavailableError", mode, res.Result, e)
						continue
					}
					if !e.SandboxUnavailable || e.Code != executor.CodeSandboxUnavailable {
						t.Errorf("%s: error %+v is not a SandboxUnavailableError with code %s", mode, e, executor.CodeSandboxUnavailable)
					}
					want := strings.Replace(unavailableWorkspaceWrite, `"workspace-write"`, fmt.Sprintf("%q", mode), 1) + " Runner failure: "
					if !strings.HasPrefix(e.Text, want) || len(e.Text) == len(want) || strings.Contains(e.Text, "\n") {
						t.Errorf("%s: message\n %q\nwant one line starting\n %q\nand a runner failure detail", mode, e.Text, want)
					}
					if e.ExecError || e.Invalid || e.Aborted {
						t.Errorf("%s: error misclassified: %+v", mode, e)
					}
					requireAbsent(t, m[k])
				}
			})
		}
	})
}

// TestExecutorExitCodesAreResults: an exit status of 125 (the CLI's setup
// failure code), 126, 127 or a signal is the command's own, a plain result.
func TestExecutorExitCodesAreResults(t *testing.T) {
	t.Parallel()
	forEachIdentity(t, func(t *testing.T, id identity) {
		type want struct {
			exit   int
			signal string
		}
		cmds := []struct {
			cmd string
			want
		}{
			{"exit 125", want{125, ""}},
			{"exit 126", want{126, ""}},
			{"no-such-command-dsh-it", want{127, ""}},
			{"kill -9 $$", want{137, "SIGKILL"}},
			{"kill -TERM $$", want{143, "SIGTERM"}},
		}
		var cases []hCase
		for _, mode := range execModes {
			spec := harnessproto.Spec{Config: id.execConfig(t, mode), Action: "concurrent"}
			for _, c := range cmds {
				spec.Requests = append(spec.Requests, harnessproto.Request{Command: c.cmd})
			}
			cases = append(cases, hCase{name: mode, spec: spec})
		}
		outs := id.harnessAll(t, cases)
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				for k, res := range outs[i].Results {
					r := requireResult(t, res)
					requireConfined(t, r, c.name)
					if r.ExitCode != cmds[k].exit || r.Signal != cmds[k].signal {
						t.Errorf("%q: exit=%d signal=%q, want %d %q", cmds[k].cmd, r.ExitCode, r.Signal, cmds[k].exit, cmds[k].signal)
					}
					if r.TimedOut || r.Aborted || r.Sandbox.RunnerFailed {
						t.Errorf("%q: timedOut=%v aborted=%v runnerFailed=%v", cmds[k].cmd, r.TimedOut, r.Aborted, r.Sandbox.RunnerFailed)
					}
				}
			})
		}
	})
}

// TestExecutorShellUnusable: a configured shell that cannot be executed is
// an ExecError (the sandbox was fine, the command never ran) — or is
// refused by NewExecutor; a shell name not found in PATH is refused by
// NewExecutor.
func TestExecutorShellUnusable(t *testing.T) {
	t.Parallel()
	forEachIdentity(t, func(t *testing.T, id identity) {
		dir := id.mkdirOwned(t, "/tmp", "dsh-it-shell-")
		plain := filepath.Join(dir, "sh-0644")
		id.writeOwned(t, plain, "#!/bin/sh\nexit 0\n", 0o644)
		shells := []struct {
			name, path string
			notExist   bool
		}{
			{"missing", filepath.Join(dir, "no-such-shell"), true},
			{"mode-0644", plain, false},
			{"directory", dir, false},
		}
		var cases []hCase
		var notExist []bool
		for _, mode := range execModes {
			for _, sh := range shells {
				notExist = append(notExist, sh.notExist)
				cfg := id.execConfig(t, mode)
				cfg.Shell = sh.path
				cases = append(cases, hCase{name: mode + "/" + sh.name, spec: harnessproto.Spec{Config: cfg, Action: "run",
					Request: harnessproto.Request{Command: fmt.Sprintf("touch %q", filepath.Join(cfg.Workspace, "ran"))}}})
			}
			cfg := id.execConfig(t, mode)
			cfg.Shell = "no-such-shell-dsh-it"
			cases = append(cases, hCase{name: mode + "/not-in-PATH", spec: harnessproto.Spec{Config: cfg, Action: "run", Request: harnessproto.Request{Command: "true"}}})
			notExist = append(notExist, true)
		}
		hs := make([]*harnessProc, len(cases))
		for i, c := range cases {
			hs[i] = id.startHarness(t, c.spec)
		}
		for i, c := range cases {
			out := hs[i].wait(t, 60*time.Second)
			t.Run(c.name, func(t *testing.T) {
				requireAbsent(t, filepath.Join(c.spec.Config.Workspace, "ran"))
				if strings.HasSuffix(c.name, "/not-in-PATH") {
					if out.NewExecErr == "" {
						t.Errorf("NewExecutor accepted a shell not found in PATH; run outcome %+v", out.Outcome)
					}
					return
				}
				if out.NewExecErr != "" {
					t.Logf("NewExecutor refused the shell: %s", out.NewExecErr)
					return
				}
				e := out.Error
				if e == nil || out.Result != nil {
					t.Fatalf("result %+v error %+v, want an ExecError", out.Result, e)
				}
				if !e.ExecError || e.SandboxUnavailable || e.Invalid {
					t.Errorf("error %+v, want an ExecError (not sandbox unavailable)", e)
				}
				if e.NotExist != notExist[i] {
					t.Errorf("errors.Is(err, fs.ErrNotExist) = %v, want %v (%s)", e.NotExist, notExist[i], e.Text)
				}
			})
		}
	})
}
