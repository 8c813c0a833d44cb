//go:build linux

package integration

// Integration tests of the Go sandbox executor (executor.Executor), the seam of
// section 3 of the contract. The executor is driven by the harness program
// (integration/internal/harness) started as root and as the unprivileged test
// user, so that what depends on the identity (namespaces, spill file
// ownership, /proc visibility) is tested for both, and so that a test can
// SIGKILL the process hosting the executor. A few checks that do not depend
// on the identity run in-process (executor_inprocess_test.go).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/integration/internal/harnessproto"
	"github.com/dsh-sandbox/dsh-sandbox/integration/internal/procscan"
	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
)

var (
	harnessBin string // integration/internal/harness
	harnessErr error  // why it could not be built
)

// ---------------------------------------------------------------------------
// The harness (integration/internal/harness) and its JSON spec and output
// (package harnessproto).

func f64(v float64) *float64 { return &v }
func str(s string) *string   { return &s }

// msScaled is ms milliseconds scaled by testtime, for the harness's integer
// millisecond fields (kill_grace_ms, kill_after_ms, abort_after_ms).
func msScaled(ms int) int { return int(testtime.Ms(float64(ms))) }

func needHarness(t *testing.T) {
	t.Helper()
	if harnessErr != nil {
		t.Fatalf("the executor harness did not build: %v", harnessErr)
	}
	if harnessBin == "" {
		t.Fatal("the executor harness was not built (runMain must build integration/internal/harness)")
	}
}

// harnessProc is a running harness.
type harnessProc struct {
	cmd        *exec.Cmd
	outF, errF *os.File
	spec       []byte
	done       chan struct{} // closed when it has ended; then werr is set
	werr       error
}

// startHarness starts the harness as the identity with spec on fd 3 and the
// identity's minimal environment plus env. Its stdout and stderr go to
// files, so that a process left holding them cannot block anything.
func (id identity) startHarness(t *testing.T, spec harnessproto.Spec, env ...string) *harnessProc {
	t.Helper()
	return id.startHarnessWrapped(t, nil, spec, env...)
}

// startHarnessWrapped is startHarness behind an argv prefix (a degraded-host
// simulation that execs the harness).
func (id identity) startHarnessWrapped(t *testing.T, wrap []string, spec harnessproto.Spec, env ...string) *harnessProc {
	t.Helper()
	needHarness(t)
	tmp := t.TempDir()
	if f := testtime.Factor(); f > 1 && spec.TimeScale == 0 {
		spec.TimeScale = f
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	h := &harnessProc{spec: b}
	specPath := filepath.Join(tmp, "spec.json")
	if err := os.WriteFile(specPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(specPath)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if h.outF, err = os.Create(filepath.Join(tmp, "stdout")); err != nil {
		t.Fatal(err)
	}
	if h.errF, err = os.Create(filepath.Join(tmp, "stderr")); err != nil {
		t.Fatal(err)
	}
	// The harness's own stdin is a pipe nobody writes to or closes while it
	// runs: a command that inherited it instead of /dev/null would hang.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinR.Close()
	if wrap == nil {
		wrap = simulatedHost(t, id)
	}
	argv := append(append(append([]string{}, wrap...), harnessBin), "-spec-fd", "3")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = id.env(env...)
	cmd.Dir = "/"
	cmd.Stdin = stdinR
	cmd.Stdout = h.outF
	cmd.Stderr = h.errF
	cmd.ExtraFiles = []*os.File{in}
	cmd.SysProcAttr = id.sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the harness: %v", err)
	}
	h.cmd = cmd
	h.done = make(chan struct{})
	go func() { h.werr = cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-h.done
		stdinW.Close()
		h.outF.Close()
		h.errF.Close()
	})
	return h
}

// wait waits for the harness (killing it after timeout, scaled by testtime:
// it only bounds a hang) and decodes its output.
func (h *harnessProc) wait(t *testing.T, timeout time.Duration) harnessproto.Output {
	t.Helper()
	timeout = testtime.Scale(timeout)
	select {
	case <-h.done:
	case <-time.After(timeout):
		// SIGQUIT first: the Go runtime prints every goroutine on stderr.
		_ = h.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-h.done:
		case <-time.After(testtime.Scale(2 * time.Second)):
			_ = h.cmd.Process.Kill()
			<-h.done
		}
		t.Fatalf("the harness did not finish within %v (killed with SIGQUIT); spec %s; stderr %q", timeout, h.spec, h.stderr())
	}
	stdout, _ := os.ReadFile(h.outF.Name())
	if h.werr != nil {
		t.Fatalf("the harness failed: %v; spec %s; stderr %q; stdout %q", h.werr, h.spec, h.stderr(), trunc(string(stdout)))
	}
	var out harnessproto.Output
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("bad harness output: %v: %q", err, trunc(string(stdout)))
	}
	if out.CloseErr != "" {
		t.Errorf("Executor.Close: %s", out.CloseErr)
	}
	if !slices.Equal(out.EnvBefore, out.EnvAfter) {
		t.Errorf("the executor changed the harness's environment:\n before %q\n after  %q", out.EnvBefore, out.EnvAfter)
	}
	t.Logf("harness spec %s\n  output %s", trunc(string(h.spec)), trunc(string(stdout)))
	return out
}

func (h *harnessProc) stderr() string {
	b, _ := os.ReadFile(h.errF.Name())
	return string(b)
}

// harness runs the harness to its end as the identity.
func (id identity) harness(t *testing.T, spec harnessproto.Spec, env ...string) harnessproto.Output {
	t.Helper()
	out := id.startHarness(t, spec, env...).wait(t, 60*time.Second)
	if out.NewExecErr != "" {
		t.Fatalf("NewExecutor: %s", out.NewExecErr)
	}
	return out
}

// hCase is one harness run of a table.
type hCase struct {
	name string
	spec harnessproto.Spec
	env  []string
}

// harnessAll starts the harness for every case at once (most cases mostly
// wait: running them together keeps the suite fast whatever -parallel is),
// then waits for each.
func (id identity) harnessAll(t *testing.T, cases []hCase) []harnessproto.Output {
	t.Helper()
	hs := make([]*harnessProc, len(cases))
	for i, c := range cases {
		hs[i] = id.startHarness(t, c.spec, c.env...)
	}
	outs := make([]harnessproto.Output, len(cases))
	for i, h := range hs {
		outs[i] = h.wait(t, 60*time.Second)
		if outs[i].NewExecErr != "" {
			t.Fatalf("%s: NewExecutor: %s", cases[i].name, outs[i].NewExecErr)
		}
	}
	return outs
}

// execConfig is the usual executor config for the identity: a workspace it
// owns, a short kill grace (400 ms, scaled by testtime: the time a command
// has to act on SIGTERM), a spill directory it owns.
func (id identity) execConfig(t *testing.T, mode string) harnessproto.Config {
	t.Helper()
	return harnessproto.Config{
		Mode:        mode,
		Workspace:   id.workspace(t),
		KillGraceMs: msScaled(400),
		SpillDir:    id.mkdirOwned(t, "/tmp", "dsh-it-spill-"),
	}
}

// requireResult fails unless the outcome is a result without an error.
func requireResult(t *testing.T, o harnessproto.Outcome) *executor.RunResult {
	t.Helper()
	if o.Error != nil {
		t.Fatalf("unexpected error: %+v", *o.Error)
	}
	if o.Result == nil {
		t.Fatal("no result and no error")
	}
	return o.Result
}

// requireConfined checks the facts of a command that ran under a confined mode.
func requireConfined(t *testing.T, r *executor.RunResult, mode string) {
	t.Helper()
	if r.Sandbox.Mode.String() != mode {
		t.Errorf("facts mode = %v, want %s", r.Sandbox.Mode, mode)
	}
	if r.Sandbox.RunnerFailed {
		t.Errorf("runner failed: %s", r.Sandbox.RunnerFailure)
	}
	if mode == "danger-full-access" {
		if r.Sandbox.Enforcement.Level != "none" {
			t.Errorf("enforcement level = %q under danger-full-access, want none", r.Sandbox.Enforcement.Level)
		}
		return
	}
	if l := r.Sandbox.Enforcement.Level; l != "full" && l != "partial" {
		t.Errorf("enforcement level = %q, want full or partial", l)
	}
	switch layers := r.Sandbox.Enforcement.Layers; {
	case simulatedHostLacks("landlock"):
		// The mount view is the one filesystem layer left there.
		if slices.Contains(layers, "landlock") || !slices.Contains(layers, "mount-view") {
			t.Errorf("%s: layers = %v, want the mount view and no landlock", simulatedHostName(), layers)
		}
	case os.Getenv("DSH_REQUIRE_LANDLOCK") == "1" && !slices.Contains(layers, "landlock"):
		t.Errorf("DSH_REQUIRE_LANDLOCK=1 but the command ran without the landlock layer: %+v", r.Sandbox.Enforcement)
	}
}

// ---------------------------------------------------------------------------
// Host processes by a substring of their command line.

// taggedNonce returns a fresh nonce; every process still carrying it in its
// command line when the test ends is SIGKILLed.
func taggedNonce(t *testing.T) string {
	n := nonce()
	t.Cleanup(func() {
		for _, p := range procscan.WithCmdline(n) {
			pid, _, _ := strings.Cut(p, ":")
			if v, err := strconv.Atoi(pid); err == nil {
				_ = syscall.Kill(v, syscall.SIGKILL)
			}
		}
	})
	return n
}

// requireNoneLeft polls for up to grace (scaled by testtime) until no host
// process carries s in its command line.
func requireNoneLeft(t *testing.T, s string, grace time.Duration) {
	t.Helper()
	grace = testtime.Scale(grace)
	deadline := time.Now().Add(grace)
	for {
		ps := procscan.WithCmdline(s)
		if len(ps) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("survivors %v after the command ended: %q", grace, ps)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// treeScript starts, in the command's cwd, a setsid'd daemon and a
// double-forked daemon that ignores SIGTERM and SIGHUP, waits until both run,
// prints "ready", creates the file treeArmed(n) (ready or not: a harness
// armed on it then stops the command, and the test reports the missing
// "ready") and sleeps in the foreground. Every process of the tree carries n
// in its command line; the sleeps are `sleep 1000<n><k>`, k = 1..3.
func treeScript(n string) string {
	return fmt.Sprintf(`setsid bash -c 'touch .a-%[1]s; exec sleep 1000%[1]s1' </dev/null >/dev/null 2>&1 &
( trap '' TERM HUP; bash -c 'touch .b-%[1]s; exec sleep 1000%[1]s2' </dev/null >/dev/null 2>&1 & )
for i in $(seq %[3]s); do [ -e .a-%[1]s ] && [ -e .b-%[1]s ] && break; sleep 0.01; done
[ -e .a-%[1]s ] && [ -e .b-%[1]s ] && echo ready
touch %[2]s
sleep 1000%[1]s3
echo not-killed`, n, treeArmed(n), tries(1000))
}

// treeArmed is the file treeScript(n) creates in its cwd once it printed
// "ready" (or gave up waiting for its daemons).
func treeArmed(n string) string { return ".armed-" + n }

var execModes = []string{"workspace-write", "danger-full-access"}

// ---------------------------------------------------------------------------
// Lifecycle: timeout, grace, abort, kill, host exit.

// TestExecutorTimeoutTrapRuns: on timeout the command's process group gets
// SIGTERM first, so a TERM trap runs; the result says timedOut, not aborted,
// with the effective timeout.
func TestExecutorTimeoutTrapRuns(t *testing.T) {
	t.Parallel()
	// The timeout runs from the spawn, inside the executor: scaled, so that
	// bash has installed its trap when it fires, and so is the grace
	// (execConfig), so that the trap gets to run.
	timeoutMs := testtime.Ms(300)
	forEachIdentity(t, func(t *testing.T, id identity) {
		var cases []hCase
		for _, mode := range execModes {
			cases = append(cases, hCase{name: mode, spec: harnessproto.Spec{
				Config:  id.execConfig(t, mode),
				Action:  "run",
				Request: harnessproto.Request{Command: `trap 'echo bye' TERM; sleep 30 & wait`, TimeoutMs: f64(timeoutMs)},
			}})
		}
		outs := id.harnessAll(t, cases)
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				out := outs[i]
				r := requireResult(t, out.Outcome)
				requireConfined(t, r, c.name)
				if !strings.Contains(r.Stdout.Text, "bye") {
					t.Errorf("stdout %q lacks the TERM trap's output", r.Stdout.Text)
				}
				if !r.TimedOut || r.Aborted || r.Killed {
					t.Errorf("timedOut=%v aborted=%v killed=%v, want true false false", r.TimedOut, r.Aborted, r.Killed)
				}
				if r.TimeoutMs != timeoutMs {
					t.Errorf("timeoutMs = %v, want %v", r.TimeoutMs, timeoutMs)
				}
				grace := float64(c.spec.Config.KillGraceMs)
				if out.ElapsedMs < timeoutMs || out.ElapsedMs > timeoutMs+grace+testtime.Ms(5000) {
					t.Errorf("the run took %.0f ms, want about %.0f", out.ElapsedMs, timeoutMs)
				}
			})
		}
	})
}

// TestExecutorTimeoutKillsAfterGrace: a command that ignores SIGTERM is
// SIGKILLed once the grace has passed, not before — on timeout, and on a
// background Kill (the process is "stopping" meanwhile).
func TestExecutorTimeoutKillsAfterGrace(t *testing.T) {
	t.Parallel()
	const script = `trap '' TERM; echo started; while :; do sleep 0.05; done`
	// The timeout runs from the spawn, inside the executor: scaled, so that
	// bash has installed its trap when it fires. The Kill comes once the
	// command printed "started" (its trap is installed), however slow the
	// machine.
	timeoutMs := testtime.Ms(300)
	forEachIdentity(t, func(t *testing.T, id identity) {
		var cases []hCase
		for _, mode := range execModes {
			cases = append(cases, hCase{name: mode + "/timeout", spec: harnessproto.Spec{
				Config:  id.execConfig(t, mode), // grace 400 ms (scaled)
				Action:  "run",
				Request: harnessproto.Request{Command: script, TimeoutMs: f64(timeoutMs)},
			}}, hCase{name: mode + "/kill", spec: harnessproto.Spec{
				Config:  id.execConfig(t, mode),
				Action:  "start",
				Request: harnessproto.Request{Command: script},
				KillOn:  "started",
			}})
		}
		outs := id.harnessAll(t, cases)
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				out := outs[i]
				mode, how, _ := strings.Cut(c.name, "/")
				r := requireResult(t, out.Outcome)
				requireConfined(t, r, mode)
				if r.Signal != "SIGKILL" && r.ExitCode != 137 {
					t.Errorf("signal=%q exit=%d, want SIGKILL / 137", r.Signal, r.ExitCode)
				}
				if how == "kill" {
					if !r.Killed || r.TimedOut || r.Aborted || !out.KillReturned {
						t.Errorf("killed=%v timedOut=%v aborted=%v Kill()=%v, want true false false true", r.Killed, r.TimedOut, r.Aborted, out.KillReturned)
					}
					if out.StatusAfterKill != string(executor.StatusStopping) {
						t.Errorf("status right after Kill = %q, want stopping", out.StatusAfterKill)
					}
				} else if !r.TimedOut || r.Aborted || r.Killed {
					t.Errorf("timedOut=%v aborted=%v killed=%v, want true false false", r.TimedOut, r.Aborted, r.Killed)
				}
				if r.Stdout.Text != "started\n" {
					t.Errorf("stdout = %q, want %q", r.Stdout.Text, "started\n")
				}
				// stop: the timeout (counted from the spawn, which comes
				// after the start of ElapsedMs), or the moment of Kill.
				stop, grace := timeoutMs, float64(c.spec.Config.KillGraceMs)
				if how == "kill" {
					if out.KillAtMs == 0 {
						t.Fatal("the harness never called Kill")
					}
					stop = out.KillAtMs
				}
				if out.ElapsedMs < stop+grace {
					t.Errorf("SIGKILL came after %.0f ms, before stop+grace (%.0f+%.0f ms)", out.ElapsedMs, stop, grace)
				}
				if out.ElapsedMs > stop+grace+testtime.Ms(5000) {
					t.Errorf("the command ran for %.0f ms, want about stop+grace (%.0f+%.0f ms)", out.ElapsedMs, stop, grace)
				}
			})
		}
	})
}

// TestExecutorNoSurvivors: after a timeout, an abort (context cancelled), a
// background Kill and a background abort, nothing the command started
// survives — neither a setsid'd daemon nor a double-forked one ignoring
// SIGTERM — in workspace-write and in danger-full-access (no sandbox runner,
// same lifecycle guarantees). The harness itself checks after the result
// settled (while it still runs), and the test again after it exited.
func TestExecutorNoSurvivors(t *testing.T) {
	t.Parallel()
	forEachIdentity(t, func(t *testing.T, id identity) {
		var cases []hCase
		var nonces []string
		for _, mode := range execModes {
			for _, how := range []string{"timeout", "abort", "kill", "background-abort"} {
				n := taggedNonce(t)
				nonces = append(nonces, n)
				cfg := id.execConfig(t, mode)
				spec := harnessproto.Spec{
					Config:      cfg,
					Request:     harnessproto.Request{Command: treeScript(n)},
					SurvivorsOf: n,
				}
				// The timeout runs from the spawn (scaled: the tree must be
				// up by then); the aborts and the Kill come once the command
				// said its daemons run.
				switch how {
				case "timeout":
					spec.Action, spec.Request.TimeoutMs = "run", f64(testtime.Ms(2000))
				case "abort":
					spec.Action, spec.AbortAfterMs, spec.ArmFile = "run", 100, filepath.Join(cfg.Workspace, treeArmed(n))
				case "kill":
					spec.Action, spec.KillOn = "start", "ready"
				case "background-abort":
					spec.Action, spec.AbortAfterMs, spec.ArmOn = "start", 100, "ready"
				}
				cases = append(cases, hCase{name: mode + "/" + how, spec: spec})
			}
		}
		outs := id.harnessAll(t, cases)
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				out, n := outs[i], nonces[i]
				mode, how, _ := strings.Cut(c.name, "/")
				r := out.Result
				if r == nil {
					t.Fatalf("no result: %+v", out.Error)
				}
				requireConfined(t, r, mode)
				if !strings.Contains(r.Stdout.Text, "ready") {
					t.Errorf("the daemons were not running when the command was stopped (stdout %q): test precondition", r.Stdout.Text)
				}
				if strings.Contains(r.Stdout.Text, "not-killed") {
					t.Errorf("the foreground sleep was not killed (stdout %q)", r.Stdout.Text)
				}
				switch how {
				case "timeout":
					if !r.TimedOut || r.Aborted || out.Error != nil {
						t.Errorf("timedOut=%v aborted=%v error=%+v, want true false nil", r.TimedOut, r.Aborted, out.Error)
					}
				case "abort":
					if r.TimedOut || !r.Aborted || out.Error == nil || !out.Error.Aborted || !out.Error.Canceled {
						t.Errorf("timedOut=%v aborted=%v error=%+v, want false true ErrAborted+Canceled", r.TimedOut, r.Aborted, out.Error)
					}
				case "kill":
					if !r.Killed || r.Aborted || !out.KillReturned {
						t.Errorf("killed=%v aborted=%v Kill()=%v, want true false true", r.Killed, r.Aborted, out.KillReturned)
					}
				case "background-abort":
					if !r.Aborted || r.Killed || r.TimedOut {
						t.Errorf("aborted=%v killed=%v timedOut=%v, want true false false", r.Aborted, r.Killed, r.TimedOut)
					}
				}
				if len(out.Survivors) > 0 {
					t.Errorf("processes of the command still ran %v after its result settled: %q", testtime.Scale(2*time.Second), out.Survivors)
				}
				requireNoneLeft(t, n, 2*time.Second)
			})
		}
	})
}

// TestExecutorTimeoutAbortExclusive: the first of timeout and abort wins, the
// other is not reported even when it fires while the command is being
// stopped (the command survives SIGTERM, so it lives through the grace).
func TestExecutorTimeoutAbortExclusive(t *testing.T) {
	t.Parallel()
	// The command's TERM trap only leaves a file (.term) and returns; once
	// it is installed the command creates .started.
	const script = `trap 'touch .term' TERM; touch .started; while :; do sleep 0.05; done`
	// abort-first: the abort comes 150 ms after .started, the timeout (it
	// runs from the spawn, inside the executor: scaled, to come after the
	// abort however slow the sandbox start) within the grace.
	// timeout-first: the timeout, the abort 200 ms after the trap ran
	// (.term), within the grace. The timeout runs from the spawn, and bash
	// must have installed its trap when it fires; how long bash takes to
	// get there depends on the machine's load (2.5 s once in the VM), so a
	// timeout that came first (no .term: the abort never armed) is tried
	// again, longer.
	firsts := []float64{testtime.Ms(150), testtime.Ms(1000), testtime.Ms(5000)}
	second := testtime.Ms(1000)
	grace := msScaled(1500)
	spec := func(t *testing.T, id identity, mode, cause string, first float64) harnessproto.Spec {
		cfg := id.execConfig(t, mode)
		cfg.KillGraceMs = grace
		if cause == "timeout" {
			return harnessproto.Spec{Config: cfg, Action: "run",
				Request:      harnessproto.Request{Command: script, TimeoutMs: f64(first)},
				AbortAfterMs: 200, ArmFile: filepath.Join(cfg.Workspace, ".term"),
			}
		}
		return harnessproto.Spec{Config: cfg, Action: "run",
			Request:      harnessproto.Request{Command: script, TimeoutMs: f64(second)},
			AbortAfterMs: 150, ArmFile: filepath.Join(cfg.Workspace, ".started"),
		}
	}
	forEachIdentity(t, func(t *testing.T, id identity) {
		var cases []hCase
		for _, mode := range execModes {
			for _, cause := range []string{"abort", "timeout"} {
				cases = append(cases, hCase{name: mode + "/" + cause + "-first", spec: spec(t, id, mode, cause, firsts[0])})
			}
		}
		outs := id.harnessAll(t, cases)
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				out := outs[i]
				mode, cause, _ := strings.Cut(c.name, "/")
				first := firsts[0]
				for k := 1; cause == "timeout-first" && out.ArmedAtMs == 0 && k < len(firsts); k++ {
					t.Logf("the timeout of %.0f ms came before bash installed its trap: again with a longer one", first)
					first = firsts[k]
					out = id.harnessAll(t, []hCase{{name: c.name, spec: spec(t, id, mode, "timeout", first)}})[0]
				}
				if out.AbortAtMs == 0 {
					t.Errorf("the abort never came (armed at %.0f ms): test precondition", out.ArmedAtMs)
				}
				// The timeout runs from the spawn, after the start of ElapsedMs.
				stop := first
				if cause == "abort-first" {
					stop = out.AbortAtMs
				}
				if out.ElapsedMs < stop+float64(grace) {
					t.Errorf("the run ended after %.0f ms, before the first cause + grace (%.0f+%d ms)", out.ElapsedMs, stop, grace)
				}
				if cause == "abort-first" {
					r := out.Result
					if r == nil {
						t.Fatalf("an aborted Run returns its result with the error; got none (error %+v)", out.Error)
					}
					if !r.Aborted || r.TimedOut {
						t.Errorf("aborted=%v timedOut=%v, want true false", r.Aborted, r.TimedOut)
					}
					if out.Error == nil || !out.Error.Aborted || !out.Error.Canceled {
						t.Errorf("error = %+v, want one wrapping ErrAborted and context.Canceled", out.Error)
					}
					if r.TimeoutMs != second {
						t.Errorf("timeoutMs = %v, want %v", r.TimeoutMs, second)
					}
					return
				}
				r := requireResult(t, out.Outcome)
				if !r.TimedOut || r.Aborted {
					t.Errorf("timedOut=%v aborted=%v, want true false", r.TimedOut, r.Aborted)
				}
				if r.Signal != "SIGKILL" {
					t.Errorf("signal = %q, want SIGKILL", r.Signal)
				}
			})
		}
	})
}

// TestExecutorHostExitKillsTrees: when the process hosting the executor
// ends — SIGKILLed, or exiting without Close — every live background tree
// dies with it, setsid'd and double-forked daemons included, in
// workspace-write and danger-full-access.
func TestExecutorHostExitKillsTrees(t *testing.T) {
	t.Parallel()
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, how := range []string{"sigkill", "exit"} {
			t.Run(how, func(t *testing.T) {
				n := taggedNonce(t)
				var reqs []harnessproto.Request
				var sleeps []string
				for i, mode := range execModes {
					m := fmt.Sprintf("%s%d", n, i)
					reqs = append(reqs, harnessproto.Request{Command: treeScript(m), Mode: mode})
					for k := 1; k <= 3; k++ {
						sleeps = append(sleeps, fmt.Sprintf("1000%s%d", m, k))
					}
				}
				h := id.startHarness(t, harnessproto.Spec{Config: id.execConfig(t, "workspace-write"), Action: "hold", Requests: reqs,
					ReadyOn: "ready", ExitAfterReady: how == "exit"})
				var line string
				_ = pollCond(20*time.Second, func() bool {
					b, _ := os.ReadFile(h.outF.Name())
					line = string(b)
					select {
					case <-h.done:
						return true
					default:
						return strings.HasPrefix(line, "READY ")
					}
				})
				if !strings.HasPrefix(line, "READY ") {
					t.Fatalf("the harness never became ready: stdout %q stderr %q", line, h.stderr())
				}
				if how == "sigkill" {
					for _, s := range sleeps {
						if err := pollCond(5*time.Second, func() bool { return len(procsWithCmdline("sleep", s)) == 1 }); err != nil {
							t.Fatalf("`sleep %s` is not running before the host is killed (test precondition); processes: %q", s, procscan.WithCmdline(n))
						}
					}
					t.Logf("killing the harness; its trees: %q", procscan.WithCmdline(n))
					if err := h.cmd.Process.Kill(); err != nil {
						t.Fatal(err)
					}
				}
				<-h.done
				if how == "exit" && h.werr != nil {
					t.Errorf("the harness did not exit cleanly: %v; stderr %q", h.werr, h.stderr())
				}
				requireNoneLeft(t, n, 2*time.Second)
			})
		}
	})
}

// TestExecutorBackgroundDenial: a denial in a background command is part of
// its settled facts, and the write did not happen.
func TestExecutorBackgroundDenial(t *testing.T) {
	t.Parallel()
	forEachIdentity(t, func(t *testing.T, id identity) {
		out := id.outside(t)
		target := filepath.Join(out, "f")
		o := id.harness(t, harnessproto.Spec{
			Config:  id.execConfig(t, "workspace-write"),
			Action:  "start",
			Request: harnessproto.Request{Command: fmt.Sprintf("echo x > %q; sleep 0.2", target)},
		})
		r := requireResult(t, o.Outcome)
		requireConfined(t, r, "workspace-write")
		if !r.Sandbox.Denied {
			t.Errorf("denied = false, want true; facts %+v", r.Sandbox)
		}
		if !slices.ContainsFunc(r.Sandbox.Denials, func(d sandbox.Denial) bool { return d.Op == "write" && d.Path == target }) {
			t.Errorf("denials %+v lack op write path %s", r.Sandbox.Denials, target)
		}
		if r.ExitCode != 0 || r.Killed || r.Aborted || r.TimedOut || r.TimeoutMs != 0 {
			t.Errorf("exit=%d killed=%v aborted=%v timedOut=%v timeoutMs=%v, want 0 false false false 0",
				r.ExitCode, r.Killed, r.Aborted, r.TimedOut, r.TimeoutMs)
		}
		if o.KillAfterDone == nil || *o.KillAfterDone {
			t.Errorf("Kill on an ended process = %v, want false", o.KillAfterDone)
		}
		if o.StatusAtEnd != string(executor.StatusExited) {
			t.Errorf("status = %q, want exited", o.StatusAtEnd)
		}
		requireAbsent(t, target)
	})
}

// childRunner returns the pid of the child of parent whose command line
// starts with dsh-sandbox-runner and contains n, or 0.
func childRunner(parent int, n string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.HasPrefix(b, []byte("dsh-sandbox-runner\x00")) || !bytes.Contains(b, []byte(n)) {
			continue
		}
		if f := statFields(filepath.Join("/proc", e.Name())); len(f) > 1 && f[1] == strconv.Itoa(parent) {
			return pid
		}
	}
	return 0
}

// TestExecutorRunnerKilledNoSurvivors: when the process keeping a command's
// tree (the sandbox runner, or the process-tree keeper of
// danger-full-access) is SIGKILLed from outside — the OOM killer, an
// operator — the executor still ends the command within its timeout and
// grace, and nothing the command started goes on running unsupervised after
// the executor reported its end. In workspace-write the runner is the init
// of a pid namespace; the same mode on a host without pid namespaces
// (simulated: degrade usernsonly) and danger-full-access have no such net.
func TestExecutorRunnerKilledNoSurvivors(t *testing.T) {
	t.Parallel()
	forEachIdentity(t, func(t *testing.T, id identity) {
		type rcase struct {
			name, mode, action string
			wrap               []string
			n                  string
			h                  *harnessProc
		}
		var cases []*rcase
		for _, v := range []struct {
			name, mode string
			wrap       []string
		}{
			{"workspace-write", "workspace-write", nil},
			{"danger-full-access", "danger-full-access", nil},
			{"workspace-write-no-pidns", "workspace-write", []string{degradeBin, "usernsonly"}},
		} {
			if v.wrap != nil {
				needHelper(t)
				if err := id.userNamespacesWork(); err != nil {
					t.Logf("!!! %s NOT TESTED: cannot simulate a host without pid namespaces: %v", v.name, err)
					continue
				}
			}
			for _, action := range []string{"run", "start"} {
				c := &rcase{name: v.name + "/" + action, mode: v.mode, action: action, wrap: v.wrap, n: taggedNonce(t)}
				spec := harnessproto.Spec{Config: id.execConfig(t, v.mode), Action: action, SurvivorsOf: c.n,
					Request: harnessproto.Request{Command: treeScript(c.n)}}
				if action == "run" {
					spec.Request.TimeoutMs = f64(testtime.Ms(3000))
				}
				c.h = id.startHarnessWrapped(t, v.wrap, spec)
				cases = append(cases, c)
			}
		}
		for _, c := range cases {
			var runner int
			if err := pollCond(10*time.Second, func() bool {
				runner = childRunner(c.h.cmd.Process.Pid, c.n)
				return runner != 0 && len(procsWithCmdline("sleep", "1000"+c.n+"3")) == 1
			}); err != nil {
				t.Fatalf("%s: the command never ran (runner %d): %q; harness stderr %q", c.name, runner, procscan.WithCmdline(c.n), c.h.stderr())
			}
			if err := syscall.Kill(runner, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		// A foreground Run must end by its timeout (3 s) plus the grace; the
		// harness then looks for survivors for up to 2 s (all scaled).
		limit := testtime.Scale(8 * time.Second)
		deadline := time.Now().Add(limit)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				select {
				case <-c.h.done:
				case <-time.After(time.Until(deadline)):
				}
				select {
				case <-c.h.done:
				default:
					t.Fatalf("the runner was SIGKILLed and the executor has not reported the command's end %v later "+
						"(a foreground timeout of %.0f ms was set for run); the command's processes: %q", limit, testtime.Ms(3000), procscan.WithCmdline(c.n))
				}
				out := c.h.wait(t, time.Second)
				if r := out.Result; r != nil {
					t.Logf("result after the runner was killed: exit=%d signal=%q timedOut=%v runnerFailed=%v %q",
						r.ExitCode, r.Signal, r.TimedOut, r.Sandbox.RunnerFailed, r.Sandbox.RunnerFailure)
				} else {
					t.Logf("error after the runner was killed: %+v", out.Error)
				}
				if len(out.Survivors) > 0 {
					t.Errorf("the runner was SIGKILLed and the executor reported the command's end, "+
						"but its processes still ran %v later, unsupervised: %q", testtime.Scale(2*time.Second), out.Survivors)
					return
				}
				requireNoneLeft(t, c.n, 2*time.Second)
			})
		}
	})
}
