//go:build linux

package integration

// Hardening of the executor and of sandbox.Cmd: standard streams that are
// not given are /dev/null (never closed), tails and deltas that stay valid
// UTF-8, commands and environments of any size the host can take, resource
// exhaustion at spawn reported as such, and exit statuses that a late cancel
// or Kill cannot turn into aborted/killed.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dsh-sandbox/dsh-sandbox/integration/internal/harnessproto"
	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// stdioScript exits with a bit set for each of fds 0, 1, 2 that is not open
// on /dev/null (1, 2, 4), 8 when cat fails on stdin, 16 when cat printed
// anything; so 0 means all three are /dev/null and reading stdin is an
// immediate, successful EOF.
const stdioScript = `s=0
for fd in 0 1 2; do [ "$(readlink /proc/$$/fd/$fd)" = /dev/null ] || s=$((s | (1 << fd))); done
out=$(cat) || s=$((s | 8))
[ -z "$out" ] || s=$((s | 16))
exit $s`

// runCmdWithin runs cmd, killing it (and failing) when it has not ended
// within d (scaled by testtime: it only bounds a hang).
func runCmdWithin(t *testing.T, cmd *sandbox.Cmd, d time.Duration) *sandbox.Result {
	t.Helper()
	d = testtime.Scale(d)
	if err := cmd.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	timer := time.AfterFunc(d, func() { cmd.Kill() })
	res, err := cmd.Wait()
	if !timer.Stop() {
		t.Fatalf("the command did not end within %v (killed)", d)
	}
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return res
}

// TestCmdNilStdioIsDevNull: a sandbox.Cmd with nil Stdin, Stdout and Stderr
// gives the command /dev/null on fds 0, 1 and 2 (never a closed fd), in
// every mode.
func TestCmdNilStdioIsDevNull(t *testing.T) {
	t.Parallel()
	for _, mode := range allModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			if mode != "danger-full-access" {
				requireLandlock(t)
			}
			m, err := modes.Parse(mode)
			if err != nil {
				t.Fatal(err)
			}
			p, err := modes.Derive(modes.Options{Mode: m, Workspace: canon(t, t.TempDir())})
			if err != nil {
				t.Fatal(err)
			}
			res := runCmdWithin(t, &sandbox.Cmd{Policy: p, Args: []string{"bash", "-c", stdioScript}}, 10*time.Second)
			if res.ExitCode != 0 {
				t.Errorf("exit %d: fds not on /dev/null (bits 1/2/4 = fd 0/1/2), cat failed (8) or printed (16)", res.ExitCode)
			}
		})
	}
}

// TestCmdNilStdioEachStream: one nil stream among given ones is /dev/null
// too (the others stay what they were given).
func TestCmdNilStdioEachStream(t *testing.T) {
	t.Parallel()
	requireLandlock(t)
	ws := canon(t, t.TempDir())
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	for fd := 0; fd < 3; fd++ {
		t.Run(fmt.Sprintf("fd%d", fd), func(t *testing.T) {
			streams := make([]*os.File, 3)
			for k := range streams {
				if k == fd {
					continue
				}
				f, err := os.Create(filepath.Join(t.TempDir(), "stream"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				streams[k] = f
			}
			script := fmt.Sprintf(`[ "$(readlink /proc/$$/fd/%d)" = /dev/null ] || exit 1
for k in 0 1 2; do [ $k = %d ] || [ -f "$(readlink /proc/$$/fd/$k)" ] || exit 2; done`, fd, fd)
			cmd := &sandbox.Cmd{Policy: p, Args: []string{"bash", "-c", script}, Stdin: streams[0], Stdout: streams[1], Stderr: streams[2]}
			res := runCmdWithin(t, cmd, 10*time.Second)
			if res.ExitCode != 0 {
				t.Errorf("exit %d: fd %d is not /dev/null (1) or another stream is not its file (2)", res.ExitCode, fd)
			}
		})
	}
}

// TestExecutorNilStdinIsDevNull: a request without Stdin gives the command
// /dev/null on fd 0 — cat succeeds at once with no output — as root and as
// the unprivileged user, in every mode.
func TestExecutorNilStdinIsDevNull(t *testing.T) {
	t.Parallel()
	requireLandlock(t)
	forEachIdentity(t, func(t *testing.T, id identity) {
		var cases []hCase
		for _, mode := range allModes {
			cases = append(cases, hCase{name: mode, spec: harnessproto.Spec{
				Config: id.execConfig(t, mode),
				Action: "concurrent",
				Requests: []harnessproto.Request{
					{Command: `readlink /proc/self/fd/0; cat; echo "cat=$?"; exec 9</dev/null; echo opened`, TimeoutMs: f64(testtime.Ms(10000))},
					{Command: "cat", TimeoutMs: f64(testtime.Ms(10000))},
				},
			}})
		}
		outs := id.harnessAll(t, cases)
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				rs := outs[i].Results
				if len(rs) != 2 {
					t.Fatalf("%d results", len(rs))
				}
				r := requireResult(t, rs[0])
				if want := "/dev/null\ncat=0\nopened\n"; r.Stdout.Text != want || r.ExitCode != 0 {
					t.Errorf("stdout %q exit %d (stderr %q), want %q exit 0", r.Stdout.Text, r.ExitCode, r.Stderr.Text, want)
				}
				r = requireResult(t, rs[1])
				if r.ExitCode != 0 || r.Stdout.Text != "" || r.Stderr.Text != "" {
					t.Errorf("cat without stdin: exit %d stdout %q stderr %q, want 0 and nothing", r.ExitCode, r.Stdout.Text, r.Stderr.Text)
				}
				if strings.Contains(r.Stderr.Text, "Bad file descriptor") {
					t.Errorf("stdin was a closed fd: %q", r.Stderr.Text)
				}
			})
		}
	})
}

// TestExecutorOutputKeepsCharacters: a truncated tail starts on a character
// (x then 30000 four-byte emoji, with a tail that cuts one), and background
// reads never split a character written in two pieces, nor lose it. (The
// harness's JSON turns invalid UTF-8 into U+FFFD, which this output never
// contains.)
func TestExecutorOutputKeepsCharacters(t *testing.T) {
	t.Parallel()
	requireLandlock(t)
	emoji := `printf x; for i in $(seq 30000); do printf '\xf0\x9f\x98\x80'; done`
	// the sleeps (scaled) give the reader, every 20 ms, time to read between
	// the pieces
	split := fmt.Sprintf(`printf 'a\xf0\x9f'; sleep %[1]s; printf '\x98\x80b\xe2'; sleep %[1]s; printf '\x82\xac'`, sleepArg(300*time.Millisecond))
	forEachIdentity(t, func(t *testing.T, id identity) {
		tail1003 := id.execConfig(t, "workspace-write")
		tail1003.TailBytes = 1003
		cases := []hCase{
			{name: "tail", spec: harnessproto.Spec{
				Config: tail1003, Action: "run",
				Request: harnessproto.Request{Command: emoji, TimeoutMs: f64(testtime.Ms(20000))},
			}},
			{name: "deltas", spec: harnessproto.Spec{
				Config: id.execConfig(t, "workspace-write"), Action: "start",
				Request: harnessproto.Request{Command: split}, ReadEveryMs: 20,
			}},
		}
		outs := id.harnessAll(t, cases)
		r := requireResult(t, outs[0].Outcome)
		if want := strings.Repeat("😀", 250); r.Stdout.Text != want || !r.Stdout.Truncated {
			head := r.Stdout.Text[:min(8, len(r.Stdout.Text))]
			t.Errorf("tail: truncated=%v, %d bytes starting % x, want the last 250 whole emoji", r.Stdout.Truncated, len(r.Stdout.Text), head)
		}
		r = requireResult(t, outs[1].Outcome)
		var all strings.Builder
		for i, d := range outs[1].Deltas {
			if !utf8.ValidString(d.Stdout) || strings.ContainsRune(d.Stdout, utf8.RuneError) {
				t.Errorf("delta %d %q splits a character", i, d.Stdout)
			}
			all.WriteString(d.Stdout)
		}
		if all.String() != "a😀b€" || r.ExitCode != 0 {
			t.Errorf("deltas %q (exit %d), want a😀b€ in total", all.String(), r.ExitCode)
		}
		if len(outs[1].Deltas) < 3 {
			t.Errorf("%d deltas: the reads did not land between the pieces (%+v)", len(outs[1].Deltas), outs[1].Deltas)
		}
	})
}

// TestExecutorStopAfterExitKeepsStatus: a Kill and a cancel that come once
// the command's status is known (from OnSettled) change nothing: Kill
// reports false, and the result keeps its exit status, neither killed nor
// aborted. (The window between the runner's exit message and the end of
// the teardown is tested deterministically in package sandbox.)
func TestExecutorStopAfterExitKeepsStatus(t *testing.T) {
	t.Parallel()
	requireLandlock(t)
	forEachIdentity(t, func(t *testing.T, id identity) {
		var cases []hCase
		for _, mode := range allModes {
			cases = append(cases, hCase{name: mode, spec: harnessproto.Spec{
				Config: id.execConfig(t, mode), Action: "start", StopOnSettled: true,
				Request: harnessproto.Request{Command: "echo last; exit 7"},
			}})
		}
		outs := id.harnessAll(t, cases)
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				o := outs[i].Outcome
				r := requireResult(t, o)
				if o.KillInSettled == nil || *o.KillInSettled {
					t.Errorf("Kill from OnSettled = %v, want false", o.KillInSettled)
				}
				if r.Killed || r.Aborted || r.ExitCode != 7 || r.Signal != "" {
					t.Errorf("result killed=%v aborted=%v exit=%d signal=%q, want exit 7 only", r.Killed, r.Aborted, r.ExitCode, r.Signal)
				}
				if o.StatusAtEnd != string(executor.StatusExited) {
					t.Errorf("status %q, want exited", o.StatusAtEnd)
				}
			})
		}
	})
}

// TestExecutorLongCommand: a command longer than the kernel takes for one
// argument (MAX_ARG_STRLEN, 128 KiB) runs — a 1 MiB heredoc writes a file of
// the right size — in every mode, confined by Landlock, as root and as the
// unprivileged user; it runs with fd 3 closed and no positional parameter;
// and commands at the argument limit either way of it run too.
func TestExecutorLongCommand(t *testing.T) {
	t.Parallel()
	requireLandlock(t)
	body := strings.Repeat("0123456789abcde\n", 65536) // 1 MiB
	// Not in a command substitution: its pipe could be fd 3 of the shell.
	fd3 := `if [ -e /proc/$$/fd/3 ]; then echo "fd3=open args=$#"; else echo "fd3=closed args=$#"; fi`
	write := "cat > big.txt <<'EOF'\n" + body + "EOF\nwc -c < big.txt\n" + fd3
	count := "x='" + body + "'\necho ${#x}\n" + fd3
	at := func(n int) string { // a command of exactly n bytes
		prefix, suffix := ": ", "; echo ok"
		return prefix + strings.Repeat("x", n-len(prefix)-len(suffix)) + suffix
	}
	forEachIdentity(t, func(t *testing.T, id identity) {
		var cases []hCase
		for _, mode := range allModes {
			reqs := []harnessproto.Request{
				{Command: count, TimeoutMs: f64(testtime.Ms(30000))},
				{Command: at(131071), TimeoutMs: f64(testtime.Ms(30000))},
				{Command: at(131072), TimeoutMs: f64(testtime.Ms(30000))},
			}
			if mode != "read-only" {
				reqs = append(reqs, harnessproto.Request{Command: write, TimeoutMs: f64(testtime.Ms(30000))})
			}
			cases = append(cases, hCase{name: mode, spec: harnessproto.Spec{Config: id.execConfig(t, mode), Action: "concurrent", Requests: reqs}})
		}
		outs := id.harnessAll(t, cases)
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				rs := outs[i].Results
				want := []string{fmt.Sprintf("%d\nfd3=closed args=0\n", len(body)), "ok\n", "ok\n",
					fmt.Sprintf("%d\nfd3=closed args=0\n", len(body))}
				for k, o := range rs {
					r := requireResult(t, o)
					if r.Stdout.Text != want[k] || r.ExitCode != 0 {
						t.Errorf("request %d: stdout %q exit %d stderr %q, want %q exit 0", k, r.Stdout.Text, r.ExitCode, r.Stderr.Text, want[k])
					}
					requireConfined(t, r, c.name)
				}
				if c.name != "read-only" {
					if fi, err := os.Stat(filepath.Join(outs[i].Workspace, "big.txt")); err != nil || fi.Size() != int64(len(body)) {
						t.Errorf("big.txt: %v (%v), want %d bytes", fi, err, len(body))
					}
				}
			})
		}
	})
}

// TestExecutorOversizedEnv: an environment no command can be started with
// — a variable over the kernel's per-string limit, or more than the host's
// ARG_MAX in total — is an invalid request naming the problem, and nothing
// runs; a large variable that fits reaches the command.
func TestExecutorOversizedEnv(t *testing.T) {
	t.Parallel()
	requireLandlock(t)
	forEachIdentity(t, func(t *testing.T, id identity) {
		cfg := id.execConfig(t, "workspace-write")
		touch := "touch ran; echo ${#BIG}"
		many := map[string]string{}
		for k := 0; k < 40; k++ {
			many[fmt.Sprintf("V%02d", k)] = strings.Repeat("v", 100000) // 4 MB: over ARG_MAX (8 MiB stack / 4)
		}
		cases := []hCase{
			{name: "one variable over 128 KiB", spec: harnessproto.Spec{Config: cfg, Action: "run",
				Request: harnessproto.Request{Command: touch, Env: map[string]string{"BIG": strings.Repeat("b", 131072)}}}},
			{name: "over ARG_MAX in total", spec: harnessproto.Spec{Config: cfg, Action: "run",
				Request: harnessproto.Request{Command: touch, Env: many}}},
			{name: "a managed variable over 128 KiB", spec: harnessproto.Spec{Config: cfg, Action: "start",
				Request: harnessproto.Request{Command: touch, DshEnv: map[string]string{"DSH_BIG": strings.Repeat("b", 200000)}}}},
			{name: "fits", spec: harnessproto.Spec{Config: id.execConfig(t, "workspace-write"), Action: "run",
				Request: harnessproto.Request{Command: "echo ${#BIG}", Env: map[string]string{"BIG": strings.Repeat("b", 131066)}}}},
		}
		outs := id.harnessAll(t, cases)
		for i, c := range cases[:3] {
			t.Run(c.name, func(t *testing.T) {
				e := outs[i].Error
				if e == nil || !e.Invalid || e.SandboxUnavailable || outs[i].Result != nil {
					t.Fatalf("error %+v result %+v, want an invalid request and no result", e, outs[i].Result)
				}
				if !strings.Contains(e.Text, "environment") || !strings.Contains(e.Text, "bytes") {
					t.Errorf("error %q does not name the problem", e.Text)
				}
				requireAbsent(t, filepath.Join(outs[i].Workspace, "ran"))
			})
		}
		r := requireResult(t, outs[3].Outcome)
		if r.Stdout.Text != "131066\n" || r.ExitCode != 0 {
			t.Errorf("fitting variable: stdout %q exit %d stderr %q", r.Stdout.Text, r.ExitCode, r.Stderr.Text)
		}
	})
}

// TestExecutorResourceExhaustion: running out of file descriptors at spawn,
// wherever it happens (the executor's pipes and memfd, the sandbox's
// preparation, the control socket, the runner's spawn, the runner itself,
// the seccomp listener), is a *ResourceError — never "sandbox unavailable"
// — and nothing runs; with enough descriptors the same command runs.
func TestExecutorResourceExhaustion(t *testing.T) {
	t.Parallel()
	requireLandlock(t)
	const maxHeadroom = 28
	touch := "touch"
	if simulatedHostLacks("mount-view") {
		// Without a mount view touch's utimensat is performed by the
		// supervisor, which needs descriptors of its own while the command
		// runs — past the spawn this test sweeps: with just enough for the
		// spawn it fails that call (EBADF, or EACCES without a fact). The
		// marker is made without it there.
		touch = ": >"
	}
	long := ": " + strings.Repeat("x", 200000) + "; " + touch + " ran-long"
	forEachIdentity(t, func(t *testing.T, id identity) {
		var cases []hCase
		for _, mode := range allModes {
			for h := 0; h <= maxHeadroom; h++ {
				for _, cmd := range []string{touch + " ran", long} {
					headroom := h
					cfg := id.execConfig(t, mode)
					cfg.Workspace = id.workspace(t)
					cases = append(cases, hCase{name: fmt.Sprintf("%s/headroom=%d/%d", mode, h, len(cmd)), spec: harnessproto.Spec{
						Config: cfg, Action: "run", NofileHeadroom: &headroom,
						Request: harnessproto.Request{Command: cmd, TimeoutMs: f64(testtime.Ms(20000)), Mode: mode},
					}})
				}
			}
		}
		outs := id.harnessAll(t, cases)
		resource, ran := map[string]int{}, map[string]int{}
		for i, c := range cases {
			o := outs[i].Outcome
			mode := c.spec.Request.Mode
			marker := filepath.Join(outs[i].Workspace, "ran")
			if len(c.spec.Request.Command) > 100 {
				marker += "-long"
			}
			switch {
			case o.Error != nil:
				if !o.Error.Resource || o.Error.SandboxUnavailable || strings.Contains(o.Error.Text, "danger-full-access") {
					t.Errorf("%s: error %+v, want a ResourceError only", c.name, *o.Error)
				}
				if exists(marker) {
					t.Errorf("%s: the command ran despite the error", c.name)
				}
				resource[mode]++
			case o.Result != nil && o.Result.ExitCode == 0 && mode == "read-only":
				ran[mode]++ // touch is denied under read-only: exit 1 expected
				t.Errorf("%s: touch succeeded under read-only", c.name)
			case o.Result != nil && mode == "read-only":
				ran[mode]++
			case o.Result != nil && o.Result.ExitCode == 0:
				ran[mode]++
			default:
				t.Errorf("%s: result %+v (stderr %q)", c.name, o.Result, o.Result.Stderr.Text)
			}
		}
		for _, mode := range allModes {
			if resource[mode] == 0 || ran[mode] == 0 {
				t.Errorf("%s: %d resource errors, %d runs: the sweep must cover both", mode, resource[mode], ran[mode])
			}
		}
	})
}

// TestExecutorRunnerResourceExhaustion: a runner that runs out of file
// descriptors while it sets up the sandbox (the Landlock ruleset, the id
// maps, its pipes, the seccomp listener, the self-tests) reports it as such:
// a *ResourceError, never "sandbox unavailable", and nothing runs. The runner
// is this harness behind a wrapper that lowers its RLIMIT_NOFILE.
func TestExecutorRunnerResourceExhaustion(t *testing.T) {
	t.Parallel()
	requireLandlock(t)
	needHarness(t)
	forEachIdentity(t, func(t *testing.T, id identity) {
		dir := id.mkdirOwned(t, "/tmp", "dsh-it-runner-")
		var cases []hCase
		for _, mode := range confinedModes {
			// From 5: with 0-3 taken, below that the dynamic loader itself
			// cannot open the libraries, before any runner code runs.
			for n := 5; n <= 16; n++ {
				wrapper := filepath.Join(dir, fmt.Sprintf("runner-%d", n))
				id.writeOwned(t, wrapper, fmt.Sprintf("#!/bin/bash\nulimit -n %d || exit 99\nexec -a dsh-sandbox-runner %s \"$@\"\n", n, harnessBin), 0o755)
				cfg := id.execConfig(t, mode)
				cfg.Runner = wrapper
				cases = append(cases, hCase{name: fmt.Sprintf("%s/nofile=%d", mode, n), spec: harnessproto.Spec{
					Config: cfg, Action: "run", Request: harnessproto.Request{Command: "echo ran > /dev/null; echo ok", TimeoutMs: f64(testtime.Ms(20000))},
				}})
			}
		}
		outs := id.harnessAll(t, cases)
		resource, ran := 0, 0
		for i, c := range cases {
			o := outs[i].Outcome
			switch {
			case o.Error != nil:
				if !o.Error.Resource || o.Error.SandboxUnavailable {
					t.Errorf("%s: error %+v, want a ResourceError", c.name, *o.Error)
				}
				resource++
			case o.Result != nil && o.Result.Stdout.Text == "ok\n":
				requireConfined(t, o.Result, c.spec.Config.Mode)
				ran++
			default:
				t.Errorf("%s: result %+v", c.name, o.Result)
			}
		}
		if resource == 0 || ran == 0 {
			t.Errorf("%d resource errors, %d runs: the sweep must cover both", resource, ran)
		}
	})
}
