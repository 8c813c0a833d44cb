//go:build linux

package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

// TestNoSurvivorAfterExit: a setsid/nohup daemon and a double-forked daemon
// started by the command do not outlive it, in every mode.
func TestNoSurvivorAfterExit(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range allModes {
			for _, c := range []struct{ name, script string }{
				{"setsid nohup", `setsid nohup sleep "$ARG" >/dev/null 2>&1 < /dev/null &
for i in $(seq $TRIES); do pgrep -f "^sleep $ARG\$" >/dev/null && break; sleep 0.02; done
pgrep -f "^sleep $ARG\$" >/dev/null || exit 7; exit 0`},
				{"double fork", `( ( exec sleep "$ARG" >/dev/null 2>&1 < /dev/null & ) & )
for i in $(seq $TRIES); do pgrep -f "^sleep $ARG\$" >/dev/null && break; sleep 0.02; done
pgrep -f "^sleep $ARG\$" >/dev/null || exit 7; exit 0`},
				{"setsid double fork ignoring signals", `setsid bash -c 'trap "" TERM HUP INT; ( exec sleep "$ARG" </dev/null >/dev/null 2>&1 & ); ' &
for i in $(seq $TRIES); do pgrep -f "^sleep $ARG\$" >/dev/null && break; sleep 0.02; done
pgrep -f "^sleep $ARG\$" >/dev/null || exit 7; exit 0`},
			} {
				t.Run(mode+"/"+c.name, func(t *testing.T) {
					ws := id.workspace(t)
					arg := uniqueSleep(t)
					r := id.run(t, runOpts{
						Flags: sandboxFlags(mode, ws),
						Argv:  bash(c.script),
						Env:   []string{"ARG=" + arg, "WS=" + ws, "TRIES=" + tries(200)},
						Dir:   ws,
					})
					// exit 0 proves the daemon was running when the command ended (7: never started)
					requireExit(t, r, 0)
					requireGone(t, arg, 2*time.Second)
				})
			}
		}
	})
}

// TestSIGTERMForwardedAndNoSurvivor: SIGTERM to dsh-sandbox-run reaches the
// command's trap, then nothing survives.
func TestSIGTERMForwardedAndNoSurvivor(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range allModes {
			t.Run(mode, func(t *testing.T) {
				ws := id.workspace(t)
				arg := uniqueSleep(t)
				s := id.start(t, runOpts{
					Flags: sandboxFlags(mode, ws),
					Argv: bash(`trap 'echo bye' TERM
setsid nohup sleep "$ARG" >/dev/null 2>&1 < /dev/null &
for i in $(seq $TRIES); do pgrep -f "^sleep $ARG\$" >/dev/null && break; sleep 0.02; done
echo ready
while :; do sleep 0.05; done`),
					Env: []string{"ARG=" + arg, "TRIES=" + tries(200)},
					Dir: ws,
				})
				// readiness: stdout says ready (read-only cannot write a marker file)
				if err := waitOutput(s, "ready", 10*time.Second); err != nil {
					t.Fatal(err)
				}
				if len(procsWithCmdline("sleep", arg)) == 0 {
					t.Errorf("the daemon is not running before SIGTERM (test precondition)")
				}
				if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				r := s.wait(t, 15*time.Second)
				if !strings.Contains(r.Stdout, "bye") {
					t.Errorf("the command's TERM trap did not run (stdout %q)", r.Stdout)
				}
				if r.Exit == 0 {
					t.Errorf("exit 0 after SIGTERM")
				}
				requireGone(t, arg, 2*time.Second)
			})
		}
	})
}

// TestSIGWINCHForwarded: a terminal's resize sent to dsh-sandbox-run
// reaches the command (the runner is not in the terminal's foreground
// process group), and does not end it.
func TestSIGWINCHForwarded(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range allModes {
			t.Run(mode, func(t *testing.T) {
				ws := id.workspace(t)
				s := id.start(t, runOpts{
					Flags: sandboxFlags(mode, ws),
					// Nothing after "ready" is a command substitution: bash
					// 5.2 runs a trap that arrives while it parses one, and
					// the trap fails ("unexpected EOF while looking for
					// matching `)'", seen in the 6.1 guest).
					Argv: bash(`trap 'echo resized; exit 0' WINCH
set -- $(seq $TRIES)
echo ready
for i; do sleep 0.05; done
echo never; exit 3`),
					Env: []string{"TRIES=" + tries(400)},
					Dir: ws,
				})
				if err := waitOutput(s, "ready", 10*time.Second); err != nil {
					t.Fatal(err)
				}
				if err := s.cmd.Process.Signal(syscall.SIGWINCH); err != nil {
					t.Fatal(err)
				}
				r := s.wait(t, 30*time.Second)
				if !strings.Contains(r.Stdout, "resized") {
					t.Errorf("the command's WINCH trap did not run (stdout %q, stderr %q)", r.Stdout, r.Stderr)
				}
				requireExit(t, r, 0)
			})
		}
	})
}

// TestSIGKILLOfRunnerNoSurvivor: SIGKILL of dsh-sandbox-run kills the command
// and its daemons.
func TestSIGKILLOfRunnerNoSurvivor(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range allModes {
			t.Run(mode, func(t *testing.T) { sigkillNoSurvivor(t, id, mode, nil) })
		}
	})
}

// sigkillNoSurvivor starts a command with a setsid daemon and a double-forked
// one under dsh-sandbox-run (behind wrap, e.g. a degraded-host simulation),
// SIGKILLs dsh-sandbox-run, and checks that nothing of the command survives.
func sigkillNoSurvivor(t *testing.T, id identity, mode string, wrap []string, flags ...string) {
	ws := id.workspace(t)
	daemon := uniqueSleep(t)
	main := uniqueSleep(t)
	s := id.start(t, runOpts{
		Wrap:  wrap,
		Flags: sandboxFlags(mode, ws, flags...),
		Argv: bash(`setsid nohup sleep "$D" >/dev/null 2>&1 < /dev/null &
( ( exec sleep "$D" </dev/null >/dev/null 2>&1 & ) & )
for i in $(seq $TRIES); do [ "$(pgrep -c -f "^sleep $D\$")" = 2 ] && break; sleep 0.02; done
echo ready
sleep "$M"`),
		Env: []string{"D=" + daemon, "M=" + main, "TRIES=" + tries(200)},
		Dir: ws,
	})
	if err := waitOutput(s, "ready", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := pollCond(5*time.Second, func() bool { return len(procsWithCmdline("sleep", main)) == 1 }); err != nil {
		t.Fatalf("the command's foreground sleep never started: %v", err)
	}
	if n := len(procsWithCmdline("sleep", daemon)); n != 2 {
		t.Errorf("%d daemons running before SIGKILL, want 2 (test precondition)", n)
	}
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	r := s.wait(t, 10*time.Second)
	if r.Exit != 137 {
		t.Errorf("runner exit = %d, want 137 (it was SIGKILLed)", r.Exit)
	}
	requireGone(t, daemon, 5*time.Second)
	requireGone(t, main, 5*time.Second)
}

// TestExitCodes: the command's status passes through, 128+N for signals.
func TestExitCodes(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range allModes {
			for _, c := range []struct {
				script string
				want   int
				signal string
			}{
				{`exit 0`, 0, ""},
				{`exit 3`, 3, ""},
				{`exit 125`, 125, ""},
				{`exit 255`, 255, ""},
				{`kill -9 $$`, 137, "SIGKILL"},
				{`kill -TERM $$`, 143, "SIGTERM"},
				{`kill -SEGV $$`, 139, "SIGSEGV"},
			} {
				t.Run(fmt.Sprintf("%s/%s", mode, c.script), func(t *testing.T) {
					ws := id.workspace(t)
					r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws), Argv: bash(c.script), Dir: ws})
					requireExit(t, r, c.want)
					rep := requireReport(t, r)
					if rep.Signal != c.signal {
						t.Errorf("report signal = %q, want %q", rep.Signal, c.signal)
					}
					if rep.Error != "" {
						t.Errorf("report error = %q for a command that ran", rep.Error)
					}
					if rep.Mode != mode {
						t.Errorf("report mode = %q, want %q", rep.Mode, mode)
					}
					if rep.Workspace != ws {
						t.Errorf("report workspace = %q, want %q", rep.Workspace, ws)
					}
					for _, l := range lines(r.Stderr) {
						if strings.HasPrefix(l, cliPrefix) {
							t.Errorf("unexpected runner line on stderr: %q", l)
						}
					}
				})
			}
		}
	})
}

// TestStdioEnvCwdPassThrough: stdin/stdout/stderr, environment (what the
// scrub keeps: no DSH_*, no credentials) and cwd pass through.
func TestStdioEnvCwdPassThrough(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range allModes {
			t.Run(mode, func(t *testing.T) {
				ws := id.workspace(t)
				sub := filepath.Join(ws, "sub")
				id.mkdirAt(t, sub)
				r := id.run(t, runOpts{
					Flags: sandboxFlags(mode, ws),
					Argv:  bash(`echo "out:$IT_VAR:$(pwd)"; echo err >&2; exit 0`),
					Env:   []string{"IT_VAR=v a l"},
					Dir:   sub,
				})
				requireExit(t, r, 0)
				if want := "out:v a l:" + sub + "\n"; r.Stdout != want {
					t.Errorf("stdout = %q, want %q", r.Stdout, want)
				}
				if r.Stderr != "err\n" {
					t.Errorf("stderr = %q, want %q", r.Stderr, "err\n")
				}
			})
		}
	})
}

func waitOutput(s *started, want string, timeout time.Duration) error {
	return pollCond(timeout, func() bool {
		b, _ := readAll(s.outF.Name())
		return strings.Contains(b, want)
	})
}

// pollCond polls cond every 10 ms until it holds, for up to timeout (scaled
// by testtime: every caller waits for something that must happen).
func pollCond(timeout time.Duration, cond func() bool) error {
	timeout = testtime.Scale(timeout)
	if !pollUntil(time.Now().Add(timeout), cond) {
		return fmt.Errorf("condition not met within %v", timeout)
	}
	return nil
}

// pollUntil polls cond every 10 ms until it holds (true) or the deadline
// has passed (false).
func pollUntil(deadline time.Time, cond func() bool) bool {
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
