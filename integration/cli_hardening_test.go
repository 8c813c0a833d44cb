//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/integration/internal/harnessproto"
	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

// hardReport holds the report fields the hardening added.
type hardReport struct {
	TimedOut *bool `json:"timedOut"`
	Sandbox  *struct {
		DenialsDropped *int `json:"denialsDropped"`
	} `json:"sandbox"`
}

func parseHardReport(t *testing.T, raw string) hardReport {
	t.Helper()
	var h hardReport
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		t.Fatalf("report is not JSON: %v: %q", err, trunc(raw))
	}
	return h
}

// ownReport is a --report path in a fresh /tmp directory of the identity's:
// under workspace-write the command can replace it.
func (id identity) ownReport(t *testing.T) string {
	t.Helper()
	return filepath.Join(id.mkdirOwned(t, "/tmp", "dsh-it-rep-"), "report.json")
}

// TestReportNotRedirected: the command replaces the --report file (under
// /tmp, writable in workspace-write) with a symlink to a file the caller can
// write, or with a file of its own. The report is written through the
// descriptor opened before the command started: the symlink's target is not
// created or changed, and the caller is told the name was replaced.
func TestReportNotRedirected(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		cases := []struct {
			name     string
			existing bool   // the victim exists before the run
			script   string // $R: the report, $V: the victim
			replaced bool   // the report's name no longer names the report
		}{
			{"symlink to a new file", false, `rm -f "$R"; ln -s "$V" "$R"`, true},
			{"symlink to an existing file", true, `rm -f "$R"; ln -s "$V" "$R"`, true},
			{"symlink after a rename", true, `mv "$R" "$R.old"; ln -s "$V" "$R"`, true},
			{"written by the command", false, `echo forged > "$R"`, false},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ws, out := id.workspace(t), id.outside(t)
				rep, victim := id.ownReport(t), filepath.Join(out, "victim")
				if c.existing {
					id.writeOwned(t, victim, "precious\n", 0o644)
				}
				r := id.run(t, runOpts{
					Flags: sandboxFlags("workspace-write", ws, "--report", rep), NoReport: true,
					Argv: bash(c.script), Env: []string{"R=" + rep, "V=" + victim}, Dir: ws,
				})
				requireExit(t, r, 0)
				if c.existing {
					requireContent(t, victim, "precious\n")
				} else {
					requireAbsent(t, victim)
				}
				warn := cliPrefix + "warning: --report " + rep + " was replaced while the command ran"
				if got := strings.Contains(r.Stderr, warn); got != c.replaced {
					t.Errorf("replacement warning printed = %v, want %v; stderr=%q", got, c.replaced, r.Stderr)
				}
				if !c.replaced {
					// the command's own write is overwritten: the caller reads our report
					var got Report
					if err := json.Unmarshal([]byte(readFile(t, rep)), &got); err != nil || got.ExitCode == nil || *got.ExitCode != 0 {
						t.Errorf("report = %q (%v), want the run's report", readFile(t, rep), err)
					}
				}
			})
		}
		// A report path reused from run to run: an earlier command may have
		// left a symlink or a FIFO there. Refused before anything runs.
		planted := []struct {
			name  string
			plant func(t *testing.T, rep, victim string)
		}{
			{"symlink planted before the run", func(t *testing.T, rep, victim string) {
				if err := os.Symlink(victim, rep); err != nil {
					t.Fatal(err)
				}
			}},
			{"FIFO planted before the run", func(t *testing.T, rep, _ string) {
				if err := syscall.Mkfifo(rep, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Lchown(rep, int(id.uid), int(id.gid)); err != nil {
					t.Fatal(err)
				}
			}},
		}
		for _, c := range planted {
			t.Run(c.name, func(t *testing.T) {
				ws, out := id.workspace(t), id.outside(t)
				rep, victim := id.ownReport(t), filepath.Join(out, "victim")
				id.writeOwned(t, victim, "precious\n", 0o644)
				c.plant(t, rep, victim)
				marker := filepath.Join(ws, "ran")
				r := id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws, "--report", rep), NoReport: true,
					Argv: bash(`touch "$M"`), Env: []string{"M=" + marker}, Dir: ws, Timeout: 10 * time.Second})
				requireSetupRefused(t, r)
				if !strings.Contains(r.Stderr, "cannot write report") {
					t.Errorf("stderr = %q, want the report refusal", r.Stderr)
				}
				requireContent(t, victim, "precious\n")
				requireAbsent(t, marker)
			})
		}
		t.Run("--report /dev/fd/3", func(t *testing.T) {
			// the system's symlinks are followed: the caller's own descriptor
			ws := id.workspace(t)
			path := filepath.Join(ws, "inherited.json")
			id.writeOwned(t, path, "", 0o644)
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r := id.run(t, runOpts{Flags: sandboxFlags("read-only", ws, "--report", "/dev/fd/3"), NoReport: true,
				Argv: bash("exit 3"), Dir: ws, ExtraFiles: []*os.File{f}})
			requireExit(t, r, 3)
			var got Report
			if err := json.Unmarshal([]byte(readFile(t, path)), &got); err != nil || got.ExitCode == nil || *got.ExitCode != 3 {
				t.Errorf("%s = %q (%v), want the report with exitCode 3", path, readFile(t, path), err)
			}
		})
	})
}

// TestBroadWorkspaceRefused: under workspace-write a workspace, an
// --allow-write root or a TMPDIR that is /, the home directory or an
// ancestor of it is refused with exit 125 and one line naming it (and the
// override for the first two); nothing ran, so no dotfile was written.
// --allow-broad-workspace makes a broad workspace writable on purpose, never a
// broad TMPDIR; read-only does not care.
func TestBroadWorkspaceRefused(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		type broadCase struct {
			name    string
			dir     string   // cwd ("" : a fresh workspace)
			flags   []string // after --mode workspace-write
			env     []string
			refused string // the stderr line contains this ("" : the command runs)
		}
		ancestor := filepath.Dir(id.home)
		otherHome := id.mkdirOwned(t, "/var/tmp", "dsh-it-home-")
		cases := []broadCase{
			{name: "cwd is /", dir: "/", refused: "refusing to make workspace / writable: it is the root directory (--allow-broad-workspace overrides)"},
			{name: "--workspace /", flags: []string{"--workspace", "/"}, refused: "refusing to make workspace / writable"},
			{name: "cwd is $HOME", dir: id.home, refused: "refusing to make workspace " + id.home + " writable: it is the home directory (--allow-broad-workspace overrides)"},
			{name: "--workspace $HOME", flags: []string{"--workspace", id.home}, refused: "refusing to make workspace " + id.home + " writable"},
			{name: "--workspace an ancestor of $HOME", flags: []string{"--workspace", ancestor}, refused: "refusing to make workspace " + ancestor + " writable"},
			{name: "passwd home with another $HOME", flags: []string{"--workspace", id.home}, env: []string{"HOME=" + otherHome},
				refused: "refusing to make workspace " + id.home + " writable: it is the home directory"},
			{name: "--allow-write $HOME", flags: []string{"--allow-write", id.home}, refused: "refusing to make writable root " + id.home + " writable"},
			{name: "--allow-write /", flags: []string{"--allow-write", "/"}, refused: "refusing to make writable root / writable"},
			{name: "TMPDIR is $HOME", env: []string{"TMPDIR=" + id.home}, refused: "refusing to make TMPDIR " + id.home + " writable: it is the home directory (point TMPDIR at a dedicated directory, or --unsetenv TMPDIR)"},
			{name: "TMPDIR is /", env: []string{"TMPDIR=/"}, refused: "refusing to make TMPDIR / writable"},
			{name: "--setenv TMPDIR=$HOME", flags: []string{"--setenv", "TMPDIR=" + id.home}, refused: "refusing to make TMPDIR " + id.home + " writable"},
			{name: "TMPDIR is $HOME even with the override", flags: []string{"--allow-broad-workspace"}, env: []string{"TMPDIR=" + id.home}, refused: "refusing to make TMPDIR " + id.home + " writable"},
			{name: "override: --workspace $HOME", flags: []string{"--workspace", id.home, "--allow-broad-workspace"}},
			{name: "override: --allow-write $HOME", flags: []string{"--allow-write", id.home, "--allow-broad-workspace"}},
			{name: "--unsetenv TMPDIR drops a broad TMPDIR", flags: []string{"--unsetenv", "TMPDIR", "--allow-write", id.home, "--allow-broad-workspace"}, env: []string{"TMPDIR=/"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				dotfile := filepath.Join(id.home, ".dsh-it-broad-"+nonce())
				t.Cleanup(func() { os.Remove(dotfile) })
				dir := c.dir
				if dir == "" {
					dir = id.workspace(t)
				}
				r := id.run(t, runOpts{Flags: append([]string{"--mode", "workspace-write"}, c.flags...),
					Argv: bash(`touch "$DOT"`), Env: append([]string{"DOT=" + dotfile}, c.env...), Dir: dir})
				if c.refused == "" && simulatedHostLacks("mount-view") && len(homeSecrets(id.home)) > 0 {
					// The override makes the home writable, but only a
					// mount view hides a secret in a writable root: the
					// command is refused (docs/DESIGN.md, Secrets).
					requireSetupRefused(t, r)
					if want := "without a mount view: it lies in the writable root " + id.home + ","; !strings.Contains(r.Stderr, "cannot hide "+id.home+"/") || !strings.Contains(r.Stderr, want) {
						t.Errorf("%s: stderr = %q, want the refusal to hide a secret of %s (%v) %q", simulatedHostName(), r.Stderr, id.home, homeSecrets(id.home), want)
					}
					requireAbsent(t, dotfile)
					return
				}
				if c.refused == "" {
					requireExit(t, r, 0)
					if !exists(dotfile) {
						t.Errorf("%s not written although the override makes the home writable", dotfile)
					}
					return
				}
				requireSetupRefused(t, r)
				if !strings.Contains(r.Stderr, c.refused) {
					t.Errorf("stderr = %q, want it to contain %q", r.Stderr, c.refused)
				}
				requireAbsent(t, dotfile)
				if rep := requireReport(t, r); rep.ExitCode == nil || *rep.ExitCode != 125 || !strings.Contains(rep.Error, "refusing to make") {
					t.Errorf("report exitCode = %v error = %q, want 125 and the refusal", rep.ExitCode, rep.Error)
				}
			})
		}
		t.Run("read-only in / and in $HOME", func(t *testing.T) {
			for _, dir := range []string{"/", id.home} {
				r := id.run(t, runOpts{Argv: bash("true"), Dir: dir})
				requireExit(t, r, 0)
			}
		})
		t.Run("executor", func(t *testing.T) {
			dotfile := filepath.Join(id.home, ".dsh-it-broad-"+nonce())
			t.Cleanup(func() { os.Remove(dotfile) })
			cfg := id.execConfig(t, "workspace-write")
			home := cfg
			home.Workspace = id.home
			outs := id.startHarness(t, harnessproto.Spec{Config: home, Action: "run",
				Request: harnessproto.Request{Command: fmt.Sprintf("touch %q", dotfile)}}).wait(t, 60*time.Second)
			if want := "refusing to make workspace " + id.home + " writable"; !strings.Contains(outs.NewExecErr, want) {
				t.Errorf("NewExecutor error = %q, want it to contain %q", outs.NewExecErr, want)
			}
			out := id.harness(t, harnessproto.Spec{Config: cfg, Action: "run", Request: harnessproto.Request{
				Command: fmt.Sprintf("touch %q", dotfile), Session: &harnessproto.Session{ID: "s", Workspace: id.home}}})
			if out.Error == nil || !strings.Contains(out.Error.Text, "refusing to make workspace "+id.home+" writable") {
				t.Errorf("a session workspace of $HOME: error = %+v, result = %+v", out.Error, out.Result)
			}
			requireAbsent(t, dotfile)
		})
	})
}

// TestEnvScrubbed: the command's environment is the caller's minus the
// library's scrub (names with KEY, PASSWORD, SECRET, TOKEN, any case, and
// DSH_*), then --keep-env, --unsetenv, --setenv; --clearenv starts empty.
func TestEnvScrubbed(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		env := []string{"OPENAI_API_KEY=sk-dsh-it", "GITHUB_TOKEN=ghp-x", "db_password=pw", "AWS_SECRET_ACCESS_KEY=s",
			"MONKEY=banana", "DSH_SESSION_ID=s1", "KEEP_ME=1", "OTHER=2"}
		scrubbed := []string{"OPENAI_API_KEY", "GITHUB_TOKEN", "db_password", "AWS_SECRET_ACCESS_KEY", "MONKEY", "DSH_SESSION_ID"}
		cases := []struct {
			name    string
			flags   []string
			present map[string]string // name -> value
			absent  []string
		}{
			{"default", nil, map[string]string{"KEEP_ME": "1", "OTHER": "2", "PATH": testPATH, "HOME": id.home}, scrubbed},
			{"--keep-env", []string{"--keep-env", "GITHUB_TOKEN", "--keep-env", "MONKEY"},
				map[string]string{"GITHUB_TOKEN": "ghp-x", "MONKEY": "banana", "KEEP_ME": "1"}, []string{"OPENAI_API_KEY", "DSH_SESSION_ID"}},
			{"--unsetenv", []string{"--unsetenv", "KEEP_ME", "--unsetenv", "NOT_SET"}, map[string]string{"OTHER": "2"}, append([]string{"KEEP_ME"}, scrubbed...)},
			{"--setenv", []string{"--setenv", "A=b=c", "--setenv", "OPENAI_API_KEY=given", "--setenv", "OTHER=3", "--setenv", "EMPTY="},
				map[string]string{"A": "b=c", "OPENAI_API_KEY": "given", "OTHER": "3", "EMPTY": ""}, []string{"GITHUB_TOKEN"}},
			{"--unsetenv then --setenv", []string{"--unsetenv", "OTHER", "--setenv", "OTHER=4"}, map[string]string{"OTHER": "4"}, nil},
			{"--clearenv", []string{"--clearenv", "--keep-env", "PATH", "--setenv", "X=1"}, map[string]string{"PATH": testPATH, "X": "1"},
				append([]string{"HOME", "KEEP_ME", "OTHER", "LANG"}, scrubbed...)},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ws := id.workspace(t)
				r := id.run(t, runOpts{Flags: sandboxFlags("read-only", ws, c.flags...), Argv: []string{"/usr/bin/env"}, Env: env, Dir: ws})
				requireExit(t, r, 0)
				got := map[string]string{}
				for _, l := range lines(r.Stdout) {
					if k, v, ok := strings.Cut(l, "="); ok {
						got[k] = v
					}
				}
				for k, v := range c.present {
					if g, ok := got[k]; !ok || g != v {
						t.Errorf("%s = %q (set: %v), want %q", k, g, ok, v)
					}
				}
				for _, k := range c.absent {
					if v, ok := got[k]; ok {
						t.Errorf("%s=%s reached the command, want it scrubbed", k, v)
					}
				}
				if c.name == "--clearenv" && len(got) != 2 {
					t.Errorf("--clearenv: environment %v, want only PATH and X", got)
				}
			})
		}
		t.Run("the policy uses the command's TMPDIR", func(t *testing.T) {
			ws, out := id.workspace(t), id.outside(t)
			r := id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws, "--unsetenv", "TMPDIR"),
				Argv: bash(`echo x > "$OUT/f"; echo "[$TMPDIR]"`), Env: []string{"TMPDIR=" + out, "OUT=" + out}, Dir: ws})
			requireExit(t, r, 0)
			requireAbsent(t, filepath.Join(out, "f"))
			requireDenial(t, r, "workspace-write", "write", filepath.Join(out, "f"))
			if strings.TrimSpace(r.Stdout) != "[]" {
				t.Errorf("TMPDIR reached the command: %q", r.Stdout)
			}
			r = id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws, "--setenv", "TMPDIR="+out),
				Argv: bash(`echo x > "$TMPDIR/g"`), Dir: ws})
			requireExit(t, r, 0)
			requireContent(t, filepath.Join(out, "g"), "x\n")
		})
		for _, bad := range [][]string{{"--setenv", "NOVALUE"}, {"--setenv", "=v"}, {"--keep-env", ""}, {"--unsetenv", "A=B"}} {
			t.Run("usage error "+strings.Join(bad, " "), func(t *testing.T) {
				ws := id.workspace(t)
				marker := filepath.Join(ws, "ran")
				r := id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws, bad...), Argv: bash(`touch "$M"`), Env: []string{"M=" + marker}, Dir: ws})
				requireSetupRefused(t, r)
				requireAbsent(t, marker)
			})
		}
	})
}

// TestTimeout: --timeout MS sends SIGTERM to the command when it expires,
// SIGKILL to the whole tree 3000 ms later; the exit status is the command's
// as it ended, and the report says timedOut.
func TestTimeout(t *testing.T) {
	// The timeout runs inside the CLI from the command's start: scaled, so
	// that bash has installed its trap when it fires. The grace is the
	// CLI's own 3000 ms.
	short, long := strconv.Itoa(int(testtime.Ms(300))), strconv.Itoa(int(testtime.Ms(20000)))
	const graceMs = 3000
	forEachIdentity(t, func(t *testing.T, id identity) {
		cases := []struct {
			name     string
			timeout  string
			script   func(arg string) string
			exit     int
			timedOut bool
			minGrace bool // it took the KILL after the grace
		}{
			{"TERM ends it", short, func(a string) string { return "sleep " + a }, 143, true, false},
			{"a TERM trap decides the status", short, func(a string) string { return `trap "exit 7" TERM; sleep ` + a + ` & wait` }, 7, true, false},
			{"TERM ignored: KILL after the grace", short, func(a string) string { return `trap "" TERM; sleep ` + a + `; exit 3` }, 137, true, true},
			{"ends in time", long, func(string) string { return "exit 4" }, 4, false, false},
		}
		for _, mode := range allModes {
			for _, c := range cases {
				t.Run(mode+"/"+c.name, func(t *testing.T) {
					ws := id.workspace(t)
					arg := uniqueSleep(t)
					began := time.Now()
					r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws, "--timeout", c.timeout), Argv: bash(c.script(arg)), Dir: ws})
					took := time.Since(began)
					requireExit(t, r, c.exit)
					requireGone(t, arg, 2*time.Second)
					h := parseHardReport(t, r.ReportRaw)
					if h.TimedOut == nil || *h.TimedOut != c.timedOut {
						t.Errorf("report timedOut = %v, want %v", h.TimedOut, c.timedOut)
					}
					line := cliPrefix + "timed out after " + c.timeout + " ms"
					if hasLine(r.Stderr, line) != c.timedOut {
						t.Errorf("stderr %q: line %q printed = %v, want %v", r.Stderr, line, !c.timedOut, c.timedOut)
					}
					timeoutMs, _ := strconv.Atoi(c.timeout)
					if c.minGrace && took < time.Duration(timeoutMs+graceMs)*time.Millisecond {
						t.Errorf("took %v: the KILL must wait for the %d ms grace after the %d ms timeout", took, graceMs, timeoutMs)
					}
					if c.timedOut && took > testtime.Scale(15*time.Second) {
						t.Errorf("took %v despite --timeout %s", took, c.timeout)
					}
				})
			}
		}
		for _, bad := range []string{"0", "-5", "abc", "1.5"} {
			t.Run("usage error --timeout "+bad, func(t *testing.T) {
				ws := id.workspace(t)
				marker := filepath.Join(ws, "ran")
				r := id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws, "--timeout", bad), Argv: bash(`touch "$M"`), Env: []string{"M=" + marker}, Dir: ws})
				requireSetupRefused(t, r)
				requireAbsent(t, marker)
			})
		}
	})
}

// TestFlagParsing: the COMMAND is only ever what follows "--": a value given
// to a boolean flag, or a command without "--", is refused (125, one line)
// and runs nothing; --help and --version print to stdout and exit 0.
func TestFlagParsing(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		refused := []struct {
			name string
			args func(ws string) []string // the whole command line after the binary
		}{
			{"--network false -- COMMAND", func(ws string) []string {
				return []string{"--mode", "workspace-write", "--workspace", ws, "--network", "false", "--", "touch", "ran"}
			}},
			{"--quiet true -- COMMAND", func(ws string) []string {
				return []string{"--mode", "workspace-write", "--workspace", ws, "--quiet", "true", "--", "touch", "ran"}
			}},
			{"COMMAND without --", func(ws string) []string {
				return []string{"--mode", "workspace-write", "--workspace", ws, "touch", "ran"}
			}},
			{"read-only rm -rf without --", func(ws string) []string {
				return []string{"--mode", "workspace-write", "--workspace", ws, "rm", "-rf", "keep"}
			}},
			{"COMMAND before the flags", func(ws string) []string {
				return []string{"touch", "ran", "--mode", "workspace-write", "--workspace", ws}
			}},
			{"flag after the first argument", func(ws string) []string {
				return []string{"--workspace", ws, "touch", "--mode", "workspace-write", "--", "ran"}
			}},
			{"--probe with a COMMAND", func(string) []string { return []string{"--probe", "--", "touch", "ran"} }},
			{"--probe --timeout", func(string) []string { return []string{"--probe", "--timeout", "5"} }},
			{"single-dash long flag", func(ws string) []string {
				return []string{"-mode", "workspace-write", "--workspace", ws, "--", "touch", "ran"}
			}},
		}
		for _, c := range refused {
			t.Run(c.name, func(t *testing.T) {
				ws := id.workspace(t)
				id.writeOwned(t, filepath.Join(ws, "keep"), "k", 0o644)
				r := id.run(t, runOpts{Flags: c.args(ws), NoReport: true, Dir: ws})
				requireSetupRefused(t, r)
				requireAbsent(t, filepath.Join(ws, "ran"))
				requireContent(t, filepath.Join(ws, "keep"), "k")
			})
		}
		t.Run("arguments after -- are the command's", func(t *testing.T) {
			ws := id.workspace(t)
			r := id.run(t, runOpts{Flags: sandboxFlags("read-only", ws), Argv: []string{"bash", "-c", `printf '%s\n' "$@"`, "_", "--mode", "--", "-h"}, Dir: ws})
			requireExit(t, r, 0)
			if r.Stdout != "--mode\n--\n-h\n" {
				t.Errorf("stdout = %q, want the arguments untouched", r.Stdout)
			}
		})
		t.Run("--network=false", func(t *testing.T) {
			ws := id.workspace(t)
			r := id.run(t, runOpts{Flags: sandboxFlags("read-only", ws, "--network=false"), Argv: bash("true"), Dir: ws})
			requireExit(t, r, 0)
			if rep := requireReport(t, r); rep.Network {
				t.Errorf("--network=false turned the network on")
			}
		})
		for _, h := range []string{"--help", "-h"} {
			t.Run(h, func(t *testing.T) {
				r := id.run(t, runOpts{Flags: []string{h}, NoReport: true})
				requireExit(t, r, 0)
				for _, want := range []string{"usage: dsh-sandbox-run", "-- COMMAND", "--probe", "--allow-broad-workspace", "--timeout DURATION", "--setenv NAME=VALUE", "--keep-env NAME", "--clearenv", "--report FILE"} {
					if !strings.Contains(r.Stdout, want) {
						t.Errorf("--help lacks %q:\n%s", want, r.Stdout)
					}
				}
				if r.Stderr != "" {
					t.Errorf("--help wrote to stderr: %q", r.Stderr)
				}
			})
		}
		t.Run("--version", func(t *testing.T) {
			r := id.run(t, runOpts{Flags: []string{"--version"}, NoReport: true})
			requireExit(t, r, 0)
			if ls := lines(r.Stdout); len(ls) != 1 || !regexp.MustCompile(`^dsh-sandbox-run \S+ \(report format 2, go`).MatchString(ls[0]) {
				t.Errorf("--version printed %q", r.Stdout)
			}
		})
	})
}

// TestDenialsCapped: at most 20 denial lines, then one line for the rest;
// the report keeps at most 1000 distinct denials and counts the denied
// calls beyond them; nothing was written.
func TestDenialsCapped(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		cases := []struct {
			files   int
			summary string // the last stderr line of ours ("": none)
			kept    int
			dropped int
		}{
			{20, "", 20, 0},
			{25, "... and 5 more denials (see --report)", 25, 0},
			{1500, "... and 980 more denials (see --report), and 500 more denied calls not recorded (over 1000 distinct denials)", 1000, 500},
		}
		for _, c := range cases {
			t.Run(fmt.Sprint(c.files), func(t *testing.T) {
				ws, out := id.workspace(t), id.outside(t)
				script := fmt.Sprintf(`for i in $(seq 1 %d); do : 2>/dev/null > "$OUT/f$i"; done; echo done`, c.files)
				r := id.run(t, runOpts{Flags: sandboxFlags("read-only", ws), Argv: bash(script), Env: []string{"OUT=" + out}, Dir: ws})
				requireExit(t, r, 0)
				if ents, err := os.ReadDir(out); err != nil || len(ents) != 0 {
					t.Errorf("%s after the run: %d entries (%v), want none", out, len(ents), err)
				}
				var ours []string
				for _, l := range lines(r.Stderr) {
					if strings.HasPrefix(l, cliPrefix) {
						ours = append(ours, strings.TrimPrefix(l, cliPrefix))
					}
				}
				denied := 0
				for _, l := range ours {
					if strings.HasPrefix(l, "denied write "+out+"/f") {
						denied++
					}
				}
				if denied != min(c.files, 20) {
					t.Errorf("%d denial lines, want %d", denied, min(c.files, 20))
				}
				wantLines := min(c.files, 20)
				if c.summary != "" {
					wantLines++
					if len(ours) == 0 || ours[len(ours)-1] != c.summary {
						t.Errorf("last line = %q, want %q", ours[len(ours)-1:], c.summary)
					}
				}
				if len(ours) != wantLines {
					t.Errorf("%d lines of ours on stderr, want %d", len(ours), wantLines)
				}
				rep := requireReport(t, r)
				if len(rep.Denials) != c.kept {
					t.Errorf("report keeps %d denials, want %d", len(rep.Denials), c.kept)
				}
				if h := parseHardReport(t, r.ReportRaw); h.Sandbox == nil || h.Sandbox.DenialsDropped == nil || *h.Sandbox.DenialsDropped != c.dropped {
					t.Errorf("report sandbox.denialsDropped = %v, want %d", h.Sandbox, c.dropped)
				}
				if len(r.ReportRaw) > 400<<10 {
					t.Errorf("report is %d bytes", len(r.ReportRaw))
				}
			})
		}
	})
}

// TestInvalidPolicyRefused: sandbox.Cmd (built by integration/internal/rawcmd)
// refuses a hand-built policy that would enforce something else than it says
// (read-only with writable roots, relative roots, a workspace outside the
// roots): Start fails with a *SetupError and the command never runs. A
// consistent hand-built policy runs, confined.
func TestInvalidPolicyRefused(t *testing.T) {
	needCLI(t)
	if rawcmdErr != nil {
		t.Fatalf("integration/internal/rawcmd did not build: %v", rawcmdErr)
	}
	bin := rawcmdBin
	forEachIdentity(t, func(t *testing.T, id identity) {
		type policy struct {
			Mode          string   `json:"mode"`
			Workspace     string   `json:"workspace"`
			WritableRoots []string `json:"writableRoots"`
			Protected     []string `json:"protected"`
		}
		cases := []struct {
			name   string
			p      func(ws, out string) policy
			refuse string // "" : it runs
		}{
			{"read-only with a writable root", func(ws, out string) policy {
				return policy{Mode: "read-only", Workspace: ws, WritableRoots: []string{out}}
			}, "invalid policy: read-only mode with writable roots"},
			{"relative writable root", func(ws, out string) policy {
				return policy{Mode: "workspace-write", Workspace: ws, WritableRoots: []string{ws, "tmp"}}
			}, "is not absolute"},
			{"unclean writable root", func(ws, out string) policy {
				return policy{Mode: "workspace-write", Workspace: ws, WritableRoots: []string{ws, out + "/."}}
			}, "is not clean"},
			{"workspace outside the roots", func(ws, out string) policy {
				return policy{Mode: "workspace-write", Workspace: out, WritableRoots: []string{ws}}
			}, "is in no writable root"},
			{"relative workspace", func(ws, out string) policy { return policy{Mode: "read-only", Workspace: "."} }, "is not absolute"},
			{"consistent", func(ws, out string) policy {
				return policy{Mode: "workspace-write", Workspace: ws, WritableRoots: []string{ws}}
			}, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ws, out := id.workspace(t), id.outside(t)
				pj, err := json.Marshal(c.p(ws, out))
				if err != nil {
					t.Fatal(err)
				}
				inWs, inOut := filepath.Join(ws, "marker"), filepath.Join(out, "marker")
				cmd := exec.Command(bin, string(pj), "bash", "-c", `touch "$1"; touch "$2"; true`, "_", inWs, inOut)
				cmd.Env, cmd.Dir, cmd.SysProcAttr = id.env(), ws, id.sysProcAttr()
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err = cmd.Run()
				var ee *exec.ExitError
				code := 0
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				t.Logf("policy %s: exit %d, stderr %q", pj, code, stderr.String())
				requireAbsent(t, inOut)
				if c.refuse == "" {
					if code != 0 {
						t.Errorf("exit %d, want 0", code)
					}
					if !exists(inWs) {
						t.Errorf("%s not written under a consistent workspace-write policy", inWs)
					}
					return
				}
				if code != 125 || !strings.Contains(stderr.String(), "setup error: invalid policy: ") || !strings.Contains(stderr.String(), c.refuse) {
					t.Errorf("exit %d stderr %q, want 125 and a setup error containing %q", code, stderr.String(), c.refuse)
				}
				requireAbsent(t, inWs)
			})
		}
	})
}
