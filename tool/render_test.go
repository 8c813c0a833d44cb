package tool

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/tasks"
)

func TestRenderForeground(t *testing.T) {
	denied := sandbox.Facts{Mode: modes.ReadOnly, Denied: true}
	tests := []struct {
		name     string
		r        executor.RunResult
		confines bool
		want     string
	}{
		{"no output", executor.RunResult{}, true, "(no output)"},
		{"stdout only, trailing newline dropped", executor.RunResult{Stdout: executor.Output{Text: "hi\n"}}, true, "hi"},
		{"stdout and stderr", executor.RunResult{Stdout: executor.Output{Text: "out\n"}, Stderr: executor.Output{Text: "err\n"}, ExitCode: 2}, true,
			"out\n[stderr]\nerr\n[exit code: 2]"},
		{"stderr only", executor.RunResult{Stderr: executor.Output{Text: "boom"}, ExitCode: 1}, true, "[stderr]\nboom\n[exit code: 1]"},
		{"truncated with spill", executor.RunResult{Stdout: executor.Output{Text: "tail\n", Truncated: true, SpillPath: "/tmp/s/o.log"}}, true,
			"tail\n[output truncated; full output: /tmp/s/o.log]"},
		{"truncated without spill", executor.RunResult{Stderr: executor.Output{Text: "tail", Truncated: true}}, true,
			"[stderr]\ntail\n[output truncated; full output: (unavailable)]"},
		{"denied, confining executor: hint", executor.RunResult{Stderr: executor.Output{Text: "bash: /etc/x: Permission denied\n"}, ExitCode: 1, Sandbox: denied}, true,
			"[stderr]\nbash: /etc/x: Permission denied\n[sandbox: file access denied under read-only mode]\n" + EscalationHint + "\n[exit code: 1]"},
		{"denied, but the command succeeded: the quiet note only", executor.RunResult{Stdout: executor.Output{Text: "ok\n"}, Sandbox: denied}, true,
			"ok\n" + SurvivedDenialNote},
		{"denied, succeeded, network denial: the quiet note only", executor.RunResult{Sandbox: sandbox.Facts{Mode: modes.WorkspaceWrite, Denied: true, Denials: []sandbox.Denial{
			{Op: "socket", Address: "AF_INET", Syscall: "socket"},
		}}}, true, "(no output)\n" + SurvivedDenialNote},
		{"denied, killed by a signal: markers", executor.RunResult{Signal: "SIGSEGV", Sandbox: denied}, true,
			"(no output)\n[sandbox: file access denied under read-only mode]\n" + EscalationHint + "\n[killed by signal: SIGSEGV]"},
		{"denied, non-confining executor: no hint", executor.RunResult{ExitCode: 1, Sandbox: denied}, false,
			"(no output)\n[sandbox: file access denied under read-only mode]\n[exit code: 1]"},
		{"timeout then signal last", executor.RunResult{TimedOut: true, TimeoutMs: 300, Signal: "SIGTERM", ExitCode: 143}, true,
			"(no output)\n[timed out after 300ms]\n[killed by signal: SIGTERM]"},
		{"timeout on a command that trapped TERM and exited 0", executor.RunResult{Stdout: executor.Output{Text: "bye\n"}, TimedOut: true, TimeoutMs: 1500.5}, true,
			"bye\n[timed out after 1500.5ms]"},
		{"runner failure outranks denial", executor.RunResult{ExitCode: 137, Signal: "SIGKILL", Sandbox: sandbox.Facts{Mode: modes.WorkspaceWrite, Denied: true, RunnerFailed: true}}, true,
			"(no output)\n[sandbox: the sandbox runner itself failed under workspace-write mode — the command did not run; this is a sandbox problem, not a command failure]\n[killed by signal: SIGKILL]"},
		{"allowlist refusals named after the denial marker", executor.RunResult{ExitCode: 56, Sandbox: sandbox.Facts{Mode: modes.WorkspaceWrite, Denied: true, Denials: []sandbox.Denial{
			{Op: "connect", Address: "evil.test:443", Syscall: sandbox.SyscallProxy},
			{Op: "write", Path: "/etc/x", Syscall: "openat"},
			{Op: "connect", Address: "192.0.2.1:80", Syscall: "connect"},
			{Op: "connect", Address: "x.test:80", Syscall: sandbox.SyscallProxy},
			{Op: sandbox.OpResolve, Address: "y.test", Syscall: sandbox.SyscallDNS},
		}}}, true,
			"(no output)\n[sandbox: file access denied under workspace-write mode]\n[sandbox: network access denied under workspace-write mode]\n[sandbox: not in the network allowlist: evil.test:443, x.test:80, y.test]\n" + EscalationHint + "\n[exit code: 56]"},
		{"suggestions named after the allowlist's line, once each", executor.RunResult{ExitCode: 1, Sandbox: sandbox.Facts{Mode: modes.WorkspaceWrite, Denied: true, Denials: []sandbox.Denial{
			{Op: "connect", Address: "mirror.test:443", Syscall: sandbox.SyscallProxy, Suggest: &sandbox.Suggestion{Setting: "allow_domain", Value: "mirror.test", Flag: "--allow-domain mirror.test"}},
			{Op: "write", Path: "/srv/a", Syscall: "openat", Suggest: &sandbox.Suggestion{Setting: "allow_write", Value: "/srv", Flag: "--allow-write /srv"}},
			{Op: "write", Path: "/srv/b", Syscall: "openat", Suggest: &sandbox.Suggestion{Setting: "allow_write", Value: "/srv", Flag: "--allow-write /srv"}},
			{Op: "signal", Syscall: "kill", Suggest: &sandbox.Suggestion{Cannot: "no confined mode allows signal"}},
		}}}, true,
			"(no output)\n[sandbox: file access denied under workspace-write mode]\n[sandbox: network access denied under workspace-write mode]\n[sandbox: not in the network allowlist: mirror.test:443]\n[sandbox: the user can allow this with --allow-domain mirror.test, --allow-write /srv]\n" + EscalationHint + "\n[exit code: 1]"},
		{"network only: the network marker alone", executor.RunResult{Stderr: executor.Output{Text: "curl: (6) Could not resolve host: example.com\n"}, ExitCode: 6, Sandbox: sandbox.Facts{Mode: modes.WorkspaceWrite, Denied: true, Denials: []sandbox.Denial{
			{Op: "socket", Address: "AF_INET", Syscall: "socket"},
		}}}, true,
			"[stderr]\ncurl: (6) Could not resolve host: example.com\n[sandbox: network access denied under workspace-write mode]\n" + EscalationHint + "\n[exit code: 6]"},
		{"network only, with a limit hit: still network only", executor.RunResult{ExitCode: 7, Sandbox: sandbox.Facts{Mode: modes.ReadOnly, Denied: true, Denials: []sandbox.Denial{
			{Op: sandbox.OpLimit, Address: "pids", Syscall: "fork"},
			{Op: "connect", Address: "[2001:db8::1]:443", Syscall: "connect"},
			{Op: "listen", Address: "unbound", Syscall: "listen"},
		}}}, true,
			"(no output)\n[sandbox: network access denied under read-only mode]\n" + EscalationHint + "\n[exit code: 7]"},
		{"unix sockets are not network", executor.RunResult{ExitCode: 1, Sandbox: sandbox.Facts{Mode: modes.ReadOnly, Denied: true, Denials: []sandbox.Denial{
			{Op: "connect", Path: "/run/docker.sock", Syscall: "connect"},
			{Op: "bind", Address: "@abstract", Syscall: "bind"},
		}}}, false,
			"(no output)\n[sandbox: file access denied under read-only mode]\n[exit code: 1]"},
		{"every marker in order", executor.RunResult{Stdout: executor.Output{Text: "o"}, Stderr: executor.Output{Text: "e"}, TimedOut: true, TimeoutMs: 5, ExitCode: 3,
			Sandbox: sandbox.Facts{Mode: modes.WorkspaceWrite, Denied: true}}, true,
			"o\n[stderr]\ne\n[sandbox: file access denied under workspace-write mode]\n" + EscalationHint + "\n[timed out after 5ms]\n[exit code: 3]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, RenderForeground(&tt.r, tt.confines))
		})
	}
}

func TestOutcomeOf(t *testing.T) {
	tests := []struct {
		r    executor.RunResult
		want tasks.Outcome
	}{
		{executor.RunResult{}, tasks.Outcome{Status: tasks.StatusCompleted, Detail: "exit code: 0"}},
		{executor.RunResult{ExitCode: 3}, tasks.Outcome{Status: tasks.StatusCompleted, Detail: "exit code: 3"}},
		{executor.RunResult{ExitCode: 139, Signal: "SIGSEGV"}, tasks.Outcome{Status: tasks.StatusCompleted, Detail: "exit code: 139"}},
		{executor.RunResult{Killed: true, ExitCode: 143, Signal: "SIGTERM"}, tasks.Outcome{Status: tasks.StatusKilled, Detail: "signal: SIGTERM"}},
		{executor.RunResult{Killed: true, ExitCode: 0}, tasks.Outcome{Status: tasks.StatusKilled, Detail: "killed before exit"}},
		{executor.RunResult{Aborted: true, Signal: "SIGKILL"}, tasks.Outcome{Status: tasks.StatusKilled, Detail: "signal: SIGKILL"}},
		{executor.RunResult{Sandbox: sandbox.Facts{RunnerFailed: true}}, tasks.Outcome{Status: tasks.StatusFailed, Detail: "sandbox runner failed"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, outcomeOf(&tt.r))
	}
}

func TestLossyNotice(t *testing.T) {
	assert.Equal(t, "[some output was dropped from memory; full output: /a, /b]", LossyNotice([]string{"/a", "/b"}))
	assert.Equal(t, "[some output was dropped from memory; full output: (unavailable)]", LossyNotice(nil))
}
