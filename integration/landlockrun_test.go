//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

// The landlock-run drop-in: dsh-sandbox-run invoked through a symlink named
// landlock-run speaks the upstream launcher's contract (contract §6).

const (
	llPrefix         = "landlock-run: "
	llPartialLine    = "landlock-run: partial enforcement (older Landlock ABI)"
	llNotEnforced    = "landlock-run: landlock is not enforced by this kernel (ABI unsupported or disabled)"
	llProbeFullLine  = "landlock: fully enforced"
	llProbePartLine  = "landlock: partially enforced (older ABI)"
	llUpstreamFullAB = 5 // upstream's newest known Landlock ABI
)

var (
	llOnce sync.Once
	llBin  string
	llErr  error
)

// landlockRunBin is a landlock-run symlink to the built dsh-sandbox-run.
func landlockRunBin(t *testing.T) string {
	t.Helper()
	needCLI(t)
	llOnce.Do(func() {
		llBin = filepath.Join(binDir, "landlock-run")
		llErr = os.Symlink(cliPath, llBin)
	})
	if llErr != nil {
		t.Fatalf("landlock-run symlink: %v", llErr)
	}
	return llBin
}

// llRun runs landlock-run (through the symlink) with args, without a
// --report (the drop-in takes none: DSH_SANDBOX_REPORT).
func (id identity) llRun(t *testing.T, o runOpts) result {
	t.Helper()
	o.Bin, o.NoReport = landlockRunBin(t), true
	return id.run(t, o)
}

// launcherLines are the stderr lines landlock-run itself printed.
func launcherLines(r result) []string {
	var out []string
	for _, l := range lines(r.Stderr) {
		if strings.HasPrefix(l, llPrefix) {
			out = append(out, l)
		}
	}
	return out
}

// requireLauncherLines: landlock-run printed exactly want (in order), and
// before them the partial line iff partial.
func requireLauncherLines(t *testing.T, r result, partial bool, want ...string) {
	t.Helper()
	if partial {
		want = append([]string{llPartialLine}, want...)
	}
	got := launcherLines(r)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("landlock-run's stderr lines = %q, want %q (stderr %q)", got, want, r.Stderr)
	}
}

func requireLLExit(t *testing.T, r result, want int) {
	t.Helper()
	if r.Exit != want || r.Signal != 0 {
		t.Errorf("landlock-run exit = %d (signal %d), want exit %d", r.Exit, r.Signal, want)
	}
}

// llHost is what the host gives the drop-in: Landlock (required) and
// whether upstream would call its ABI partial.
func llHost(t *testing.T) (partial bool) {
	t.Helper()
	return llABI(t) < llUpstreamFullAB
}

// llABI is the Landlock ABI the drop-in gets: the host's (required), 0 on a
// simulated host without Landlock (which the mount view confines: partial
// for upstream).
func llABI(t *testing.T) int {
	t.Helper()
	abi := requireLandlock(t)
	if simulatedHostLacks("landlock") {
		return 0
	}
	return abi
}

func roProfile(argv ...string) []string {
	return append([]string{"--ro", "/", "--rw", "/dev/null", "--"}, argv...)
}

func wwProfile(root string, argv ...string) []string {
	return append([]string{"--ro", "/", "--rw", "/dev/null", "--rw", "/tmp", "--rw", root, "--"}, argv...)
}

func TestLandlockRunReadOnlyProfile(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		partial := llHost(t)
		ws := id.workspace(t)
		repDir := id.mkdirOwned(t, "/tmp", "dsh-it-llrep-")
		rep := filepath.Join(repDir, "report.json")
		denied := filepath.Join(ws, "denied")
		r := id.llRun(t, runOpts{
			Flags: roProfile(bash(fmt.Sprintf(`echo out; echo x > %q; echo sink > /dev/null && echo sink-ok; echo "key=$OPENAI_API_KEY"; exit 7`, denied))...),
			Env:   []string{"OPENAI_API_KEY=sk-test", "DSH_SANDBOX_REPORT=" + rep},
			Dir:   ws,
		})
		requireLLExit(t, r, 7)
		requireAbsent(t, denied)
		if r.Stdout != "out\nsink-ok\nkey=sk-test\n" {
			t.Errorf("stdout = %q, want the command's output, its environment unscrubbed", r.Stdout)
		}
		requireLauncherLines(t, r, partial)
		var got struct {
			Network  bool `json:"network"`
			ExitCode int  `json:"exitCode"`
			Sandbox  struct {
				Mode string `json:"mode"`
			} `json:"sandbox"`
		}
		if err := json.Unmarshal([]byte(readFile(t, rep)), &got); err != nil {
			t.Fatalf("DSH_SANDBOX_REPORT: %v", err)
		}
		if got.Sandbox.Mode != "read-only" || !got.Network || got.ExitCode != 7 {
			t.Errorf("report = %+v, want read-only, network, exit 7", got)
		}
	})
}

func TestLandlockRunPartialLineFirst(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		requireLandlock(t)
		r := id.llRun(t, runOpts{Flags: roProfile(bash(`echo err >&2; echo out`)...), Env: []string{"DSH_SANDBOX_LANDLOCK_ABI=4"}})
		requireLLExit(t, r, 0)
		if r.Stderr != llPartialLine+"\nerr\n" || r.Stdout != "out\n" {
			t.Errorf("stderr = %q stdout = %q, want the partial line before the command's output", r.Stderr, r.Stdout)
		}
		r = id.llRun(t, runOpts{Flags: roProfile(bash(`echo err >&2`)...), Env: []string{"DSH_SANDBOX_LANDLOCK_ABI=5"}})
		requireLLExit(t, r, 0)
		if abi := llABI(t); abi >= 5 && r.Stderr != "err\n" {
			t.Errorf("stderr = %q at ABI 5, want the command's alone", r.Stderr)
		}
	})
}

func TestLandlockRunWorkspaceWriteProfile(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		partial := llHost(t)
		root := id.outside(t)
		elsewhere := id.outside(t)
		tmpd := id.mkdirOwned(t, "/tmp", "dsh-it-lltmp-")
		id.mkdirAt(t, filepath.Join(root, ".git"))
		id.mkdirAt(t, filepath.Join(root, ".git", "hooks"))
		script := fmt.Sprintf(`echo a > a && echo t > %q/t; echo o > %q/o; echo evil > .envrc; echo evil > .git/hooks/pre-commit; echo done`,
			tmpd, elsewhere)
		r := id.llRun(t, runOpts{Flags: wwProfile(root, bash(script)...), Dir: root})
		requireLLExit(t, r, 0)
		if r.Stdout != "done\n" {
			t.Errorf("stdout = %q", r.Stdout)
		}
		requireContent(t, filepath.Join(root, "a"), "a\n")
		requireContent(t, filepath.Join(tmpd, "t"), "t\n")
		requireAbsent(t, filepath.Join(elsewhere, "o"))
		requireAbsent(t, filepath.Join(root, ".envrc"))
		requireAbsent(t, filepath.Join(root, ".git", "hooks", "pre-commit"))
		requireLauncherLines(t, r, partial)
	})
}

func TestLandlockRunRefusedGrants(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		requireLandlock(t)
		ws := id.workspace(t)
		marker := filepath.Join(ws, "ran")
		file := filepath.Join(ws, "f")
		id.writeOwned(t, file, "", 0o644)
		// A directory the identity cannot search: root's, 0700 (/root when
		// the test does not run as root).
		locked := "/root"
		if os.Geteuid() == 0 {
			d, err := os.MkdirTemp("/tmp", "dsh-it-lllocked-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(d) })
			if err := os.Chmod(d, 0o700); err != nil {
				t.Fatal(err)
			}
			locked = d
		}
		lockedPath := filepath.Join(locked, "dsh-ll-"+nonce())
		lockedWhy := "No such file or directory"
		if !id.isRoot() {
			lockedWhy = "Permission denied"
		}
		touch := bash("touch " + marker)
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"unopenable --ro", append([]string{"--ro", "/nonexistent-dsh-ll", "--ro", "/", "--"}, touch...),
				llPrefix + "cannot open rule path: /nonexistent-dsh-ll: No such file or directory"},
			{"unsearchable --rw", append([]string{"--ro", "/", "--rw", lockedPath, "--"}, touch...),
				llPrefix + "cannot open rule path: " + lockedPath + ": " + lockedWhy},
			{"narrower reads", append([]string{"--ro", "/usr", "--ro", "/bin", "--rw", "/dev/null", "--"}, touch...),
				llPrefix + "unsupported grant: reads limited to the --ro paths are not supported (give --ro /)"},
			{"writable file", append([]string{"--ro", "/", "--rw", file, "--"}, touch...),
				llPrefix + "unsupported grant: --rw " + file + ": not a directory (only directories and /dev/null can be granted writable here)"},
			{"usage", append([]string{"--ro", "/", "--network", "--"}, touch...), llPrefix + "usage error: unknown argument: --network"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := id.llRun(t, runOpts{Flags: tc.args, Dir: ws})
				requireLLExit(t, r, 125)
				if r.Stderr != tc.want+"\n" || r.Stdout != "" {
					t.Errorf("stderr = %q stdout = %q, want exactly %q", r.Stderr, r.Stdout, tc.want)
				}
				requireAbsent(t, marker)
			})
		}
	})
}

// TestLandlockRunBroadGrants: a grant of a home directory or of / is the
// caller's explicit choice and is honoured; the secrets stay masked.
func TestLandlockRunBroadGrants(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		partial := llHost(t)
		h := newFakeHome(t, id)
		elsewhere := id.outside(t)
		script := fmt.Sprintf(`echo n > %q/new; echo o > %q/o; cat ~/.ssh/id_ed25519 ~/.aws/credentials; echo done`, h.dir, elsewhere)
		for _, tc := range []struct {
			name      string
			args      []string
			home      bool // the write in the home lands
			elsewhere bool // the write outside the home lands
		}{
			{"--ro / (secrets masked)", roProfile(bash(script)...), false, false},
			{"--rw HOME", wwProfile(h.dir, bash(script)...), true, false},
			{"--rw /", append([]string{"--ro", "/", "--rw", "/", "--"}, bash(script)...), true, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.elsewhere && testtime.Factor() > 1 {
					// The post-run audit of the writable roots walks every
					// directory of /: a second here, 200 s in the TCG guest.
					t.Skip("--rw / walks the whole tree (the git audit of the writable roots): too slow for a slowed-down guest; runs on the host")
				}
				os.Remove(h.path("new"))
				os.Remove(filepath.Join(elsewhere, "o"))
				r := id.llRun(t, runOpts{Flags: tc.args, Env: h.env(), Dir: h.dir})
				if tc.home && simulatedHostLacks("mount-view") {
					// The grant makes the home (its .ssh, its .aws) a
					// writable root, where only a mount view hides a
					// secret: the drop-in refuses, running nothing.
					requireLLExit(t, r, 125)
					ls := slices.DeleteFunc(launcherLines(r), func(l string) bool { return l == llPartialLine })
					if len(ls) != 1 || !strings.HasPrefix(ls[0], "landlock-run: sandbox setup failed: cannot hide ") || !strings.Contains(ls[0], " without a mount view: it lies in the writable root ") {
						t.Errorf("%s: landlock-run's stderr lines = %q, want the one refusal to hide a secret", simulatedHostName(), ls)
					}
					if r.Stdout != "" {
						t.Errorf("stdout = %q: the command ran", r.Stdout)
					}
					requireAbsent(t, h.path("new"))
					requireAbsent(t, filepath.Join(elsewhere, "o"))
					return
				}
				if !strings.HasSuffix(r.Stdout, "done\n") {
					t.Errorf("stdout = %q, want the command to run to its end", r.Stdout)
				}
				for _, s := range []string{h.sshKey, h.aws} {
					if strings.Contains(r.Stdout, s) || strings.Contains(r.Stderr, s) {
						t.Errorf("the secret %q was read", s)
					}
				}
				if tc.home {
					requireContent(t, h.path("new"), "n\n")
				} else {
					requireAbsent(t, h.path("new"))
				}
				if tc.elsewhere {
					requireContent(t, filepath.Join(elsewhere, "o"), "o\n")
				} else {
					requireAbsent(t, filepath.Join(elsewhere, "o"))
				}
				requireLauncherLines(t, r, partial)
			})
		}
	})
}

func TestLandlockRunExitStatus(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		partial := llHost(t)
		ws := id.workspace(t)
		noexec := filepath.Join(ws, "noexec")
		id.writeOwned(t, noexec, "#!/bin/sh\n", 0o644)
		for _, tc := range []struct {
			name string
			argv []string
			exit int
			line string // landlock-run's own line after the partial one, if any
		}{
			{"success", bash(`exit 0`), 0, ""},
			{"failure passes through", bash(`exit 3`), 3, ""},
			{"125 passes through", bash(`echo own >&2; exit 125`), 125, ""},
			{"not in PATH", []string{"no-such-command-dsh-ll"}, 125, llPrefix + "exec failed: No such file or directory"},
			{"no such file", []string{"/nonexistent-dsh-ll/cmd"}, 125, llPrefix + "exec failed: No such file or directory"},
			{"not executable", []string{noexec}, 125, llPrefix + "exec failed: Permission denied"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rep := filepath.Join(id.mkdirOwned(t, "/tmp", "dsh-it-llrep-"), "report.json")
				r := id.llRun(t, runOpts{Flags: roProfile(tc.argv...), Dir: ws, Env: []string{"DSH_SANDBOX_REPORT=" + rep}})
				requireLLExit(t, r, tc.exit)
				var got struct {
					ExitCode *int   `json:"exitCode"`
					Error    string `json:"error"`
				}
				if err := json.Unmarshal([]byte(readFile(t, rep)), &got); err != nil {
					t.Fatalf("DSH_SANDBOX_REPORT: %v", err)
				}
				if got.ExitCode == nil || *got.ExitCode != tc.exit || (got.Error != "") != (tc.line != "") {
					t.Errorf("report exitCode %v error %q, want %d and an error iff the launcher failed", got.ExitCode, got.Error, tc.exit)
				}
				var want []string
				if tc.line != "" {
					want = append(want, tc.line)
				}
				requireLauncherLines(t, r, partial, want...)
			})
		}
	})
}

func TestLandlockRunProbe(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		partial := llHost(t)
		want := llProbeFullLine
		if partial {
			want = llProbePartLine
		}
		for _, tc := range []struct {
			name string
			env  []string
			want string
		}{
			{"host", nil, want},
			{"ABI 4", []string{"DSH_SANDBOX_LANDLOCK_ABI=4"}, llProbePartLine},
			{"ABI 2", []string{"DSH_SANDBOX_LANDLOCK_ABI=2"}, llProbePartLine},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := id.llRun(t, runOpts{Flags: []string{"--probe"}, Env: tc.env, Dir: id.workspace(t)})
				requireLLExit(t, r, 0)
				if r.Stdout != tc.want+"\n" || r.Stderr != "" {
					t.Errorf("stdout = %q stderr = %q, want exactly %q", r.Stdout, r.Stderr, tc.want)
				}
			})
		}
		r := id.llRun(t, runOpts{Flags: []string{"--probe", "--ro", "/"}})
		requireLLExit(t, r, 125)
		if r.Stderr != llPrefix+"usage error: --probe takes no other arguments\n" || r.Stdout != "" {
			t.Errorf("stderr = %q stdout = %q", r.Stderr, r.Stdout)
		}
	})
}

// TestLandlockRunDegraded: without Landlock the mount view and seccomp
// still confine (partial); with no filesystem layer at all the launcher
// refuses as upstream does.
func TestLandlockRunDegraded(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		t.Run("no Landlock", func(t *testing.T) {
			degradedNoLandlock.need(t, id)
			wrap := degradedNoLandlock.wrap()
			r := id.llRun(t, runOpts{Wrap: wrap, Flags: []string{"--probe"}})
			requireLLExit(t, r, 0)
			if r.Stdout != llProbePartLine+"\n" || r.Stderr != "" {
				t.Errorf("probe: stdout = %q stderr = %q, want %q", r.Stdout, r.Stderr, llProbePartLine)
			}
			ws := id.workspace(t)
			outside := filepath.Join(id.outside(t), "o")
			r = id.llRun(t, runOpts{Wrap: wrap, Flags: wwProfile(ws, bash(fmt.Sprintf(`echo a > a; echo o > %q; exit 4`, outside))...), Dir: ws})
			requireLLExit(t, r, 4)
			requireContent(t, filepath.Join(ws, "a"), "a\n")
			requireAbsent(t, outside)
			requireLauncherLines(t, r, true)
		})
		t.Run("no filesystem layer", func(t *testing.T) {
			degradedNeither.need(t, id)
			wrap := degradedNeither.wrap()
			r := id.llRun(t, runOpts{Wrap: wrap, Flags: []string{"--probe"}})
			requireLLExit(t, r, 125)
			if r.Stderr != llNotEnforced+"\n" || r.Stdout != "" {
				t.Errorf("probe: stdout = %q stderr = %q, want exactly %q", r.Stdout, r.Stderr, llNotEnforced)
			}
			ws := id.workspace(t)
			r = id.llRun(t, runOpts{Wrap: wrap, Flags: wwProfile(ws, bash(`echo a > a`)...), Dir: ws})
			requireLLExit(t, r, 125)
			if r.Stderr != llNotEnforced+"\n" {
				t.Errorf("run: stderr = %q, want exactly %q", r.Stderr, llNotEnforced)
			}
			requireAbsent(t, filepath.Join(ws, "a"))
		})
	})
}

func TestLandlockRunNetwork(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		partial := llHost(t)
		srv := echoServer(t)
		script := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d || exit 9; echo hi >&3; read -r l <&3; echo "$l"`, srv.port)
		r := id.llRun(t, runOpts{Flags: roProfile(bash(script)...)})
		requireLLExit(t, r, 0)
		if r.Stdout != "echo: hi\n" || srv.conns.Load() != 1 {
			t.Errorf("network open by default: stdout = %q, %d connections, want the echo and 1", r.Stdout, srv.conns.Load())
		}
		requireLauncherLines(t, r, partial)

		r = id.llRun(t, runOpts{Flags: roProfile(bash(script)...), Env: []string{"DSH_SANDBOX_NETWORK=off"}})
		requireLLExit(t, r, 9)
		time.Sleep(testtime.Scale(200 * time.Millisecond))
		if n := srv.conns.Load(); n != 1 {
			t.Errorf("DSH_SANDBOX_NETWORK=off: the listener got %d connections in all, want only the first run's", n)
		}
		requireLauncherLines(t, r, partial)
	})
}

func TestLandlockRunNoSurvivors(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		partial := llHost(t)
		arg := uniqueSleep(t)
		r := id.llRun(t, runOpts{Flags: roProfile(bash(fmt.Sprintf(`sleep %s & disown; setsid sleep %s & echo started`, arg, arg))...)})
		requireLLExit(t, r, 0)
		if r.Stdout != "started\n" {
			t.Errorf("stdout = %q", r.Stdout)
		}
		requireGone(t, arg, 5*time.Second)
		requireLauncherLines(t, r, partial)
	})
}

func TestLandlockRunSignals(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		partial := llHost(t)
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL, syscall.SIGSEGV, syscall.SIGABRT} {
			t.Run("death by "+sig.String(), func(t *testing.T) {
				r := id.llRun(t, runOpts{Flags: roProfile(bash(fmt.Sprintf(`kill -%d $$`, int(sig)))...)})
				if r.Signal != sig {
					t.Errorf("landlock-run ended with exit %d signal %d, want death by signal %d", r.Exit, r.Signal, sig)
				}
				requireLauncherLines(t, r, partial)
			})
		}
		for _, tc := range []struct {
			name   string
			sig    syscall.Signal // sent to landlock-run
			trap   string         // the command's trap of TERM and INT
			exit   int            // how landlock-run ends: exit status,
			killed bool           // or killed by SIGKILL (the tree, after the grace)
			stdout string
		}{
			{"SIGTERM reaches the command", syscall.SIGTERM, `echo trapped; exit 3`, 3, false, "trapped\n"},
			{"SIGINT reaches the command", syscall.SIGINT, `echo trapped; exit 4`, 4, false, "trapped\n"},
			{"an ignored SIGTERM: the tree is killed after the grace", syscall.SIGTERM, ``, 0, true, ""},
			{"SIGKILL of landlock-run: the tree dies with it", syscall.SIGKILL, `echo trapped; exit 3`, 0, true, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ws := id.workspace(t)
				ready := filepath.Join(ws, "ready")
				arg := uniqueSleep(t)
				s := id.start(t, runOpts{Bin: landlockRunBin(t), NoReport: true, Flags: wwProfile(ws, bash(fmt.Sprintf(
					`trap %q TERM INT; sleep %s & echo > %q; while :; do sleep 0.05; done`, tc.trap, arg, ready))...), Dir: ws})
				deadline := time.Now().Add(testtime.Scale(20 * time.Second))
				for !exists(ready) && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if err := s.cmd.Process.Signal(tc.sig); err != nil {
					t.Fatal(err)
				}
				r := s.wait(t, 0)
				if tc.killed {
					if r.Signal != syscall.SIGKILL {
						t.Errorf("landlock-run ended with exit %d signal %d, want SIGKILL", r.Exit, r.Signal)
					}
				} else {
					requireLLExit(t, r, tc.exit)
				}
				if r.Stdout != tc.stdout {
					t.Errorf("stdout = %q, want %q", r.Stdout, tc.stdout)
				}
				requireGone(t, arg, 5*time.Second)
				requireLauncherLines(t, r, partial)
			})
		}
	})
}
