//go:build linux

package integration

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSetupErrorsExit125: usage errors and an unopenable workspace exit 125
// with exactly one stderr line, and the command never runs.
func TestSetupErrorsExit125(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		type setupCase struct {
			name   string
			flags  func(ws, marker string) []string
			argv   func(marker string) []string
			report bool // the report must still be written, with error + exitCode 125
		}
		touch := func(marker string) []string { return bash(`touch "` + marker + `"`) }
		cases := []setupCase{
			{"unknown flag", func(ws, _ string) []string {
				return sandboxFlags("workspace-write", ws, "--bogus")
			}, touch, false},
			{"bad mode", func(ws, _ string) []string { return sandboxFlags("write-everything", ws) }, touch, false},
			{"empty mode", func(ws, _ string) []string { return sandboxFlags("", ws) }, touch, false},
			{"missing command after --", func(ws, _ string) []string { return sandboxFlags("workspace-write", ws) },
				func(string) []string { return []string{} }, false},
			{"missing command, no --", func(ws, _ string) []string { return sandboxFlags("workspace-write", ws) },
				nil, false},
			{"nonexistent workspace", func(ws, _ string) []string {
				return sandboxFlags("workspace-write", filepath.Join(ws, "does-not-exist"))
			}, touch, true},
			{"workspace is a file", func(ws, marker string) []string {
				return sandboxFlags("workspace-write", filepath.Join(ws, "afile"))
			}, touch, true},
			{"unreadable workspace", func(ws, _ string) []string {
				return sandboxFlags("workspace-write", filepath.Join(ws, "locked"))
			}, touch, true},
			{"nonexistent --allow-write", func(ws, _ string) []string {
				return sandboxFlags("workspace-write", ws, "--allow-write", filepath.Join(ws, "nope"))
			}, touch, true},
			{"nonexistent command", func(ws, _ string) []string { return sandboxFlags("workspace-write", ws) },
				func(string) []string { return []string{"/nonexistent/dsh-it-cmd"} }, false},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ws := id.workspace(t)
				id.writeOwned(t, filepath.Join(ws, "afile"), "", 0o644)
				locked := filepath.Join(ws, "locked")
				id.mkdirAt(t, locked)
				if id.isRoot() {
					// root bypasses DAC outside the sandbox; there is no "unreadable" for it
					if c.name == "unreadable workspace" {
						t.Skip("root can open any directory")
					}
				} else if err := os.Chmod(locked, 0o000); err != nil {
					t.Fatal(err)
				}
				marker := filepath.Join(id.workspace(t), "marker")
				o := runOpts{Flags: c.flags(ws, marker), Dir: ws, NoReport: !c.report}
				if c.argv != nil {
					o.Argv = c.argv(marker)
				}
				r := id.run(t, o)
				if c.name == "nonexistent command" {
					// exec failure of the command: 125/126/127 are all plausible;
					// the command did not run, and a runner line must explain it
					if r.Exit == 0 {
						t.Errorf("exit 0 for a nonexistent command")
					}
					return
				}
				requireSetupRefused(t, r)
				requireAbsent(t, marker)
				if c.report {
					rep := requireReport(t, r)
					if rep.Error == "" {
						t.Errorf("report has no error field")
					}
					if rep.ExitCode == nil || *rep.ExitCode != 125 {
						t.Errorf("report exitCode = %v, want 125", rep.ExitCode)
					}
					if rep.ReportSandbox != nil {
						t.Errorf("the report of a command that never ran has a sandbox object: %+v", *rep.ReportSandbox)
					}
				}
			})
		}
	})
}

// TestDenialLinesAndQuiet: one stderr line per distinct denial, counts in
// the report, nothing with --quiet.
func TestDenialLinesAndQuiet(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				script := `echo 1 > "$OUT/a"; echo 2 > "$OUT/a"; echo 3 > "$OUT/b"; echo done`
				t.Run("lines", func(t *testing.T) {
					ws, out := id.workspace(t), id.outside(t)
					r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws), Argv: bash(script), Env: []string{"OUT=" + out}, Dir: ws})
					requireExit(t, r, 0)
					requireAbsent(t, filepath.Join(out, "a"))
					requireAbsent(t, filepath.Join(out, "b"))
					var denied []string
					for _, l := range lines(r.Stderr) {
						if strings.HasPrefix(l, cliPrefix) {
							denied = append(denied, l)
						}
					}
					// Each line says how to allow it: the directory to make
					// writable, or under read-only the mode that could.
					suggest := "; allow with --allow-write " + out
					if mode == "read-only" {
						suggest = "; outside the workspace: under workspace-write, --allow-write " + out + " allows it"
					}
					want := []string{
						fmt.Sprintf("%sdenied write %s (%s mode)%s", cliPrefix, filepath.Join(out, "a"), mode, suggest),
						fmt.Sprintf("%sdenied write %s (%s mode)%s", cliPrefix, filepath.Join(out, "b"), mode, suggest),
					}
					if strings.Join(denied, "\n") != strings.Join(want, "\n") {
						t.Errorf("runner lines =\n%s\nwant\n%s", strings.Join(denied, "\n"), strings.Join(want, "\n"))
					}
					rep := requireReport(t, r)
					counts := map[string]int{}
					for _, d := range rep.Denials {
						counts[d.Op+" "+d.target()] += d.Count
					}
					if c := counts["write "+filepath.Join(out, "a")]; c != 2 {
						t.Errorf("count for a = %d, want 2 (denials %v)", c, rep.Denials)
					}
					if c := counts["write "+filepath.Join(out, "b")]; c != 1 {
						t.Errorf("count for b = %d, want 1 (denials %v)", c, rep.Denials)
					}
					if len(rep.Denials) != 2 {
						t.Errorf("want 2 distinct denials, got %v", rep.Denials)
					}
					if rep.Enforcement.Level == "" || rep.Enforcement.Level == "none" {
						t.Errorf("enforcement.level = %q in a confined mode", rep.Enforcement.Level)
					}
				})
				t.Run("quiet", func(t *testing.T) {
					ws, out := id.workspace(t), id.outside(t)
					r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws, "--quiet"), Argv: bash(script), Env: []string{"OUT=" + out}, Dir: ws})
					requireExit(t, r, 0)
					for _, l := range lines(r.Stderr) {
						if strings.HasPrefix(l, cliPrefix) {
							t.Errorf("--quiet printed %q", l)
						}
					}
					if rep := requireReport(t, r); len(rep.Denials) != 2 {
						t.Errorf("--quiet must still report the facts; denials = %v", rep.Denials)
					}
					requireAbsent(t, filepath.Join(out, "a"))
				})
			})
		}
	})
}

// TestDefaults: --mode defaults to read-only and --workspace to the cwd.
func TestDefaults(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws := id.workspace(t)
		r := id.run(t, runOpts{Argv: bash(`echo x > default-mode`), Dir: ws})
		requireFailed(t, r)
		requireAbsent(t, filepath.Join(ws, "default-mode"))
		if rep := requireReport(t, r); rep.Mode != "read-only" {
			t.Errorf("default mode = %q, want read-only", rep.Mode)
		}
		r = id.run(t, runOpts{Flags: []string{"--mode", "workspace-write"}, Argv: bash(`echo x > cwd-ws`), Dir: ws})
		requireExit(t, r, 0)
		requireContent(t, filepath.Join(ws, "cwd-ws"), "x\n")
		if rep := requireReport(t, r); rep.Workspace != ws {
			t.Errorf("default workspace = %q, want %q", rep.Workspace, ws)
		}
	})
}

// Probe JSON of the README.
type probeMode struct {
	Enforcement string   `json:"enforcement"`
	Layers      []string `json:"layers"`
	Missing     []string `json:"missing"`
	Error       string   `json:"error"`
}

type probeJSON struct {
	Version  int `json:"version"`
	Landlock struct {
		ABI       int      `json:"abi"`
		KernelABI int      `json:"kernelAbi"`
		Features  []string `json:"features"`
		Error     string   `json:"error"`
	} `json:"landlock"`
	Seccomp struct {
		Available bool `json:"available"`
		Notify    bool `json:"notify"`
	} `json:"seccomp"`
	Namespaces map[string]any       `json:"namespaces"`
	Modes      map[string]probeMode `json:"modes"`
	Allowlist  string               `json:"allowlist"`
	Caches     string               `json:"caches"`
	Loopback   string               `json:"loopback"`
	// CredentialFiles: "sanitized" or "hidden".
	CredentialFiles string `json:"credentialFiles"`
	Confined        bool   `json:"confined"`
}

func parseProbe(t *testing.T, r result) probeJSON {
	t.Helper()
	var p probeJSON
	if err := json.Unmarshal([]byte(r.Stdout), &p); err != nil {
		t.Fatalf("--probe --json output is not JSON: %v: %q", err, r.Stdout)
	}
	if p.Version != 2 {
		t.Errorf("probe version = %d, want 2", p.Version)
	}
	return p
}

// TestProbe: on this host (Landlock, seccomp notify, user namespaces) both
// confined modes are `full`. Under DSH_IT_HOST the probe, in text and JSON,
// from any directory, and a command's report name exactly the layers that
// host has and the guarantees it lacks (wantMissing).
func TestProbe(t *testing.T) {
	d := simulated()
	forEachIdentity(t, func(t *testing.T, id identity) {
		abi := requireLandlock(t)
		if d == nil {
			if err := id.userNamespacesWork(); err != nil {
				t.Skipf("user namespaces unavailable to %s, `full` is not expected: %v", id.name, err)
			}
		}
		// The namespaces the probe names, each with the layer that needs it.
		nsLayer := map[string]string{"user": "user-namespace", "mount": "mount-view", "pid": "pid-namespace",
			"net": "net-namespace", "ipc": "ipc-namespace", "uts": "uts-namespace"}
		nsOrder := []string{"user", "mount", "pid", "net", "ipc", "uts"}
		// A mode's level as the confinement layers alone make it (limits:
		// limits_test.go), and its exact missing list.
		wantLevel := func(mode string) string {
			if len(wantMissing(d, mode, abi)) == 0 {
				return "full"
			}
			return "partial"
		}
		t.Run("text", func(t *testing.T) {
			r := id.run(t, runOpts{Flags: []string{"--probe"}, NoReport: true, Dir: id.workspace(t)})
			requireExit(t, r, 0)
			want := []string{
				fmt.Sprintf("landlock: abi %d", abi),
				"seccomp: yes (user notification: yes)",
			}
			if d != nil {
				if d.lacks("landlock") {
					want[0] = "landlock: no ("
				}
				// (Docker's profile adds that the sockets are replaced.)
				want[1] = fmt.Sprintf("seccomp: yes (user notification: %s", yesNo(!d.lacks("seccomp-notify")))
			}
			ns := "namespaces:"
			for i, n := range nsOrder {
				if i > 0 {
					ns += ","
				}
				ns += fmt.Sprintf(" %s %s", n, yesNo(!d.lacks(nsLayer[n])))
			}
			want = append(want, ns)
			for _, m := range confinedModes {
				if miss := wantMissing(d, m, abi); len(miss) > 0 {
					// then ")", or the limits it cannot enforce
					want = append(want, m+": partial (missing: "+strings.Join(miss, ", "))
				} else {
					want = append(want, m+": full")
				}
			}
			want = append(want, "danger-full-access: unconfined")
			for _, want := range want {
				found := false
				for _, l := range lines(r.Stdout) {
					// "partial (missing: memory-limit)": full but for the
					// limits (checked in limits_test.go)
					if strings.HasPrefix(l, want) || strings.HasSuffix(want, ": full") && l == strings.TrimSuffix(want, "full")+"partial (missing: memory-limit)" {
						found = true
					}
				}
				if !found {
					t.Errorf("probe output lacks a line starting %q:\n%s", want, r.Stdout)
				}
			}
		})
		t.Run("json", func(t *testing.T) {
			r := id.run(t, runOpts{Flags: []string{"--probe", "--json"}, NoReport: true, Dir: id.workspace(t)})
			requireExit(t, r, 0)
			p := parseProbe(t, r)
			if d.lacks("landlock") {
				if p.Landlock.ABI != 0 || p.Landlock.Error == "" {
					t.Errorf("landlock = %+v, want abi 0 and an error on a host without Landlock", p.Landlock)
				}
			} else if p.Landlock.ABI != abi {
				t.Errorf("landlock.abi = %d, want %d", p.Landlock.ABI, abi)
			}
			if !p.Seccomp.Available || p.Seccomp.Notify == d.lacks("seccomp-notify") {
				t.Errorf("seccomp = %+v, want available and notify %v", p.Seccomp, !d.lacks("seccomp-notify"))
			}
			for _, ns := range nsOrder {
				if want := !d.lacks(nsLayer[ns]); p.Namespaces[ns] != want {
					t.Errorf("namespaces.%s = %v, want %v", ns, p.Namespaces[ns], want)
				}
			}
			for _, m := range confinedModes {
				pm := p.Modes[m]
				if want := wantMissing(d, m, abi); confinedLevel(pm.Enforcement, pm.Missing) != wantLevel(m) || !slices.Equal(withoutLimits(pm.Missing), want) || len(pm.Layers) == 0 {
					t.Errorf("modes[%s] = %+v, want %s with layers and missing %q", m, pm, wantLevel(m), want)
				}
			}
			if pm := p.Modes["danger-full-access"]; pm.Enforcement != "none" {
				t.Errorf("modes[danger-full-access].enforcement = %q, want none", pm.Enforcement)
			}
			if !p.Confined {
				t.Errorf("confined = false")
			}
		})
		t.Run("independent of the cwd", func(t *testing.T) {
			// the probe reports what the host can enforce; running it from /
			// (a service's cwd) or from the home directory must not change
			// that — nor, without a mount view, the secrets there
			for _, dir := range []string{"/", id.home} {
				r := id.run(t, runOpts{Flags: []string{"--probe", "--json"}, NoReport: true, Dir: dir})
				requireExit(t, r, 0)
				p := parseProbe(t, r)
				for _, m := range confinedModes {
					if pm := p.Modes[m]; confinedLevel(pm.Enforcement, pm.Missing) != wantLevel(m) || !slices.Equal(withoutLimits(pm.Missing), wantMissing(d, m, abi)) {
						t.Errorf("cwd %s: modes[%s] = %+v, want %s", dir, m, pm, wantLevel(m))
					}
				}
			}
		})
		t.Run("report agrees", func(t *testing.T) {
			ws := id.workspace(t)
			r := id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws), Argv: bash("true"), Dir: ws})
			requireExit(t, r, 0)
			rep := requireReport(t, r)
			wantABI := abi
			if d.lacks("landlock") {
				wantABI = 0
			}
			if confinedLevel(rep.Enforcement.Level, rep.Enforcement.Missing) != wantLevel("workspace-write") || rep.Enforcement.LandlockABI != wantABI {
				t.Errorf("report enforcement = %+v, want %s with landlockAbi %d", rep.Enforcement, wantLevel("workspace-write"), wantABI)
			}
			if want := wantMissing(d, "workspace-write", abi); !slices.Equal(withoutLimits(rep.Enforcement.Missing), want) {
				t.Errorf("report missing = %q, want %q", rep.Enforcement.Missing, want)
			}
			for _, l := range []string{"landlock", "seccomp", "seccomp-notify", "mount-view", "user-namespace", "pid-namespace", "net-namespace"} {
				if contains(rep.Enforcement.Layers, l) == d.lacks(l) {
					t.Errorf("report layers %v: %q present = %v on %s", rep.Enforcement.Layers, l, !d.lacks(l), cmp.Or(simulatedHostName(), "this host"))
				}
			}
		})
	})
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// TestReportDescribesCommand: the report names the command's argv, the
// directory it ran in and how long it took; a command that never ran has
// the argv and cwd, and no duration.
func TestReportDescribesCommand(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws := id.workspace(t)
		r := id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws), Argv: bash("sleep 0.3"), Dir: ws})
		requireExit(t, r, 0)
		rep := requireReport(t, r)
		if want := []string{"bash", "-c", "sleep 0.3"}; strings.Join(rep.Argv, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("argv = %q, want %q", rep.Argv, want)
		}
		if rep.Cwd != ws {
			t.Errorf("cwd = %q, want %q", rep.Cwd, ws)
		}
		if rep.DurationMs == nil || *rep.DurationMs < 300 {
			t.Errorf("durationMs = %v, want at least 300", rep.DurationMs)
		}
		r = id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws, "--allow-write", "/nonexistent-dsh-it"), Argv: bash("true"), Dir: ws})
		requireExit(t, r, 125)
		if rep = requireReport(t, r); rep.DurationMs != nil || rep.Cwd != ws || len(rep.Argv) != 3 {
			t.Errorf("a command that never ran: durationMs %v (want none), cwd %q, argv %q", rep.DurationMs, rep.Cwd, rep.Argv)
		}
	})
}

// TestProxyVariablesDroppedWithNetworkOff: with the network off the
// caller's proxy variables (whose URL may carry a password) do not reach
// the command; with it on they do.
func TestProxyVariablesDroppedWithNetworkOff(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws := id.workspace(t)
		env := []string{"HTTPS_PROXY=http://me:hunter2@127.0.0.1:9", "http_proxy=http://me:hunter2@127.0.0.1:9"}
		for _, mode := range []string{"read-only", "workspace-write"} {
			r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws), Argv: []string{"env"}, Dir: ws, Env: env})
			requireExit(t, r, 0)
			if strings.Contains(r.Stdout, "hunter2") {
				t.Errorf("%s: the proxy's password reached the command: %q", mode, r.Stdout)
			}
		}
		r := id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws, "--network"), Argv: []string{"env"}, Dir: ws, Env: env})
		requireExit(t, r, 0)
		if !strings.Contains(r.Stdout, "HTTPS_PROXY=http://me:hunter2@127.0.0.1:9") {
			t.Errorf("--network: the command needs the caller's proxy: %q", r.Stdout)
		}
	})
}
