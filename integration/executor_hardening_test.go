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
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
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
// within d.
func runCmdWithin(t *testing.T, cmd *sandbox.Cmd, d time.Duration) *sandbox.Result {
	t.Helper()
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
					{Command: `readlink /proc/self/fd/0; cat; echo "cat=$?"; exec 9</dev/null; echo opened`, TimeoutMs: f64(10000)},
					{Command: "cat", TimeoutMs: f64(10000)},
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
	split := `printf 'a\xf0\x9f'; sleep 0.3; printf '\x98\x80b\xe2'; sleep 0.3; printf '\x82\xac'`
	forEachIdentity(t, func(t *testing.T, id identity) {
		tail1003 := id.execConfig(t, "workspace-write")
		tail1003.TailBytes = 1003
		cases := []hCase{
			{name: "tail", spec: harnessproto.Spec{
				Config: tail1003, Action: "run",
				Request: harnessproto.Request{Command: emoji, TimeoutMs: f64(20000)},
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
				if o.StatusAtEnd != string(sandbox.StatusExited) {
					t.Errorf("status %q, want exited", o.StatusAtEnd)
				}
			})
		}
	})
}
