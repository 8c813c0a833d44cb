//go:build linux

package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-sandbox/dsh-sandbox/integration/internal/harnessproto"
	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
)

// TestExecutorConcurrentSessions: 20 Runs in parallel from 20 sessions with
// their own workspaces. Each gets exactly its own output, runs in its own
// workspace, and only its own denials (half of them write outside).
func TestExecutorConcurrentSessions(t *testing.T) {
	t.Parallel()
	const sessions = 20
	forEachIdentity(t, func(t *testing.T, id identity) {
		n := nonce()
		token := func(i int) string { return fmt.Sprintf("TOK-%s-%02d-END", n, i) }
		marker := func(i int) string { return fmt.Sprintf("marker-%02d", i) }
		var wss, outs []string
		var reqs []harnessproto.Request
		for i := range sessions {
			wss = append(wss, id.workspace(t))
			cmd := fmt.Sprintf("echo %s; echo %s >&2; echo %d > %s", token(i), token(i), i, marker(i))
			out := ""
			if i%2 == 1 {
				out = filepath.Join(id.outside(t), "f")
				cmd += fmt.Sprintf("; echo x > %q; true", out)
			}
			outs = append(outs, out)
			reqs = append(reqs, harnessproto.Request{Command: cmd, Session: &harnessproto.Session{ID: fmt.Sprintf("s%d", i), Workspace: wss[i]}})
		}
		o := id.harness(t, harnessproto.Spec{Config: id.execConfig(t, "workspace-write"), Action: "concurrent", Requests: reqs})
		if len(o.Results) != sessions {
			t.Fatalf("%d results, want %d", len(o.Results), sessions)
		}
		for i, res := range o.Results {
			t.Run(fmt.Sprintf("session-%02d", i), func(t *testing.T) {
				r := requireResult(t, res)
				requireConfined(t, r, "workspace-write")
				if r.ExitCode != 0 {
					t.Errorf("exit = %d", r.ExitCode)
				}
				if want := token(i) + "\n"; r.Stdout.Text != want {
					t.Errorf("stdout = %q, want %q", r.Stdout.Text, want)
				}
				if !strings.HasPrefix(r.Stderr.Text, token(i)+"\n") {
					t.Errorf("stderr = %q, want it to start with %q", r.Stderr.Text, token(i))
				}
				for j := range sessions {
					if j != i && strings.Contains(r.Stdout.Text+r.Stderr.Text, token(j)) {
						t.Errorf("output of session %d holds the token of session %d: %q / %q", i, j, r.Stdout.Text, r.Stderr.Text)
					}
					m := filepath.Join(wss[j], marker(i))
					if j == i {
						requireContent(t, m, fmt.Sprintf("%d\n", i))
					} else {
						requireAbsent(t, m)
					}
				}
				if outs[i] == "" {
					if r.Sandbox.Denied || len(r.Sandbox.Denials) != 0 {
						t.Errorf("session %d wrote nothing outside but has denials %+v", i, r.Sandbox.Denials)
					}
					return
				}
				requireAbsent(t, outs[i])
				if !r.Sandbox.Denied {
					t.Errorf("denied = false, want true")
				}
				for _, d := range r.Sandbox.Denials {
					if d.Path != outs[i] {
						t.Errorf("denial %+v is not about this session's path %s", d, outs[i])
					}
				}
				if !slices.ContainsFunc(r.Sandbox.Denials, func(d sandbox.Denial) bool { return d.Op == "write" && d.Path == outs[i] }) {
					t.Errorf("denials %+v lack op write %s", r.Sandbox.Denials, outs[i])
				}
			})
		}
	})
}

// TestExecutorEnvironment: the command's environment is the parent's
// scrubbed of credentials and DSH_* names, then the fixed defaults, then the
// trusted Env, then the DshEnv snapshot; the harness's own environment is
// left alone.
func TestExecutorEnvironment(t *testing.T) {
	t.Parallel()
	parent := []string{
		"DSH_FOO=1", "dsh_lower=1", "GITHUB_TOKEN=x", "MY_API_KEY=x", "MONKEY=x", "DB_PASSWORD=x",
		"Client_Secret=x", "KEEP_ME=1", "TERM=vt100", "PAGER=less", "NO_COLOR=0",
	}
	scrubbed := []string{"DSH_FOO", "dsh_lower", "GITHUB_TOKEN", "MY_API_KEY", "MONKEY", "DB_PASSWORD", "Client_Secret"}
	forEachIdentity(t, func(t *testing.T, id identity) {
		var cases []hCase
		for _, mode := range execModes {
			cases = append(cases, hCase{name: mode, env: parent, spec: harnessproto.Spec{
				Config: id.execConfig(t, mode),
				Action: "concurrent",
				Requests: []harnessproto.Request{
					{
						Command: "env",
						Env:     map[string]string{"TERM": "xterm", "TRUSTED_TOKEN": "t", "DSH_SESSION_ID": "from-env"},
						DshEnv:  map[string]string{"DSH_SESSION_ID": "s1", "DSH_SHELL": "1"},
					},
					{Command: "env"},
				},
			}})
		}
		outs := id.harnessAll(t, cases)
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				out := outs[i]
				for _, kv := range parent {
					if !slices.Contains(out.EnvAfter, kv) {
						t.Errorf("the harness's own %s is gone after the runs", kv)
					}
				}
				if len(out.Results) != 2 {
					t.Fatalf("%d results", len(out.Results))
				}
				for k, res := range out.Results {
					r := requireResult(t, res)
					requireConfined(t, r, c.name)
					env := map[string]string{}
					for _, l := range strings.Split(strings.TrimSuffix(r.Stdout.Text, "\n"), "\n") {
						name, v, _ := strings.Cut(l, "=")
						env[name] = v
					}
					want := map[string]string{"KEEP_ME": "1", "NO_COLOR": "1", "PAGER": "cat", "GIT_PAGER": "cat", "TERM": "dumb", "HOME": id.home}
					if k == 0 {
						want["TERM"], want["TRUSTED_TOKEN"], want["DSH_SESSION_ID"], want["DSH_SHELL"] = "xterm", "t", "s1", "1"
					}
					for name, v := range want {
						if got, ok := env[name]; !ok || got != v {
							t.Errorf("run %d: %s = %q (set %v), want %q", k, name, got, ok, v)
						}
					}
					for name := range env {
						if slices.Contains(scrubbed, name) {
							t.Errorf("run %d: scrubbed variable %s reached the command", k, name)
						}
						if strings.Contains(strings.ToUpper(name), "DSH_") && want[name] == "" {
							t.Errorf("run %d: unmanaged %s reached the command", k, name)
						}
					}
				}
			})
		}
	})
}

// TestExecutorStdin: the trusted Stdin reaches the command; without it the
// command reads /dev/null (EOF at once, no hang); stdin the command never
// reads does not hold it up.
func TestExecutorStdin(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0123456789abcdef\n", 20000) // 340 kB: more than a pipe holds
	forEachIdentity(t, func(t *testing.T, id identity) {
		var cases []hCase
		for _, mode := range execModes {
			cases = append(cases, hCase{name: mode, spec: harnessproto.Spec{
				Config: id.execConfig(t, mode),
				Action: "concurrent",
				Requests: []harnessproto.Request{
					{Command: "cat", Stdin: str("hello\nworld\n"), TimeoutMs: f64(testtime.Ms(10000))},
					{Command: `cat; echo "done $?"`, TimeoutMs: f64(testtime.Ms(10000))},
					{Command: "wc -c; sha256sum | cut -d' ' -f1", Stdin: str(big), TimeoutMs: f64(testtime.Ms(10000))},
					{Command: "cat", Stdin: str(""), TimeoutMs: f64(testtime.Ms(10000))},
					{Command: "true", Stdin: str(big), TimeoutMs: f64(testtime.Ms(10000))}, // never reads it
				},
			}})
		}
		outs := id.harnessAll(t, cases)
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				rs := outs[i].Results
				if len(rs) != 5 {
					t.Fatalf("%d results", len(rs))
				}
				for k, want := range []string{"hello\nworld\n", "done 0\n", fmt.Sprintf("%d\n%s\n", len(big), sha256Of(t, strings.NewReader(""))), "", ""} {
					r := requireResult(t, rs[k])
					// run 2: wc consumes all of stdin, then sha256sum reads EOF
					if r.Stdout.Text != want {
						t.Errorf("run %d: stdout = %q, want %q", k, r.Stdout.Text, want)
					}
					if r.TimedOut || r.ExitCode != 0 {
						t.Errorf("run %d: timedOut=%v exit=%d (a command reading stdin hung?)", k, r.TimedOut, r.ExitCode)
					}
					if rs[k].ElapsedMs > testtime.Ms(5000) {
						t.Errorf("run %d took %.0f ms", k, rs[k].ElapsedMs)
					}
				}
			})
		}
	})
}

// TestExecutorWorkdir: workdirs resolve against the session's workspace
// (relative), stand as given (absolute), default to the session's workspace,
// or to the executor's without a session; unusable workdirs and timeouts are
// invalid requests and the command never runs; timeouts are capped.
func TestExecutorWorkdir(t *testing.T) {
	t.Parallel()
	forEachIdentity(t, func(t *testing.T, id identity) {
		cfg := id.execConfig(t, "workspace-write")
		sess := id.workspace(t)
		abs := id.workspace(t)
		id.mkdirAt(t, filepath.Join(sess, "sub"))
		id.mkdirAt(t, filepath.Join(cfg.Workspace, "sub2"))
		id.writeOwned(t, filepath.Join(sess, "file"), "", 0o644)
		s := &harnessproto.Session{ID: "s", Workspace: sess}
		marker := filepath.Join(abs, "ran")
		touch := fmt.Sprintf("touch %q", marker)
		reqs := []harnessproto.Request{
			{Command: "pwd", Session: s, Workdir: "sub"},
			{Command: "pwd", Session: s, Workdir: abs},
			{Command: "pwd", Session: s},
			{Command: "pwd"},
			{Command: "pwd", Workdir: "sub2"},
			{Command: "pwd", Session: s, Workdir: "sub/../sub/."},
			{Command: touch, Session: s, Workdir: "nope"},
			{Command: touch, Session: s, Workdir: "file"},
			{Command: touch, Session: s, TimeoutMs: f64(0)},
			{Command: touch, Session: s, TimeoutMs: f64(-1)},
			{Command: touch, Session: &harnessproto.Session{ID: "rel", Workspace: "relative/ws"}},
			{Command: "   "},
			{Command: "true", TimeoutMs: f64(1e12)},
			{Command: "true"},
		}
		wantPwd := []string{filepath.Join(sess, "sub"), abs, sess, cfg.Workspace, filepath.Join(cfg.Workspace, "sub2"), filepath.Join(sess, "sub")}
		o := id.harness(t, harnessproto.Spec{Config: cfg, Action: "concurrent", Requests: reqs})
		if len(o.Results) != len(reqs) {
			t.Fatalf("%d results", len(o.Results))
		}
		for k, res := range o.Results {
			switch {
			case k < len(wantPwd):
				r := requireResult(t, res)
				if r.Stdout.Text != wantPwd[k]+"\n" {
					t.Errorf("request %d (workdir %q, session %v): pwd = %q, want %s", k, reqs[k].Workdir, reqs[k].Session, r.Stdout.Text, wantPwd[k])
				}
			case k < 12:
				if res.Error == nil || !res.Error.Invalid || res.Result != nil {
					t.Errorf("request %d (%q, workdir %q, session %v, timeout %v): result %+v error %+v, want an ErrInvalidRequest and no result",
						k, reqs[k].Command, reqs[k].Workdir, reqs[k].Session, reqs[k].TimeoutMs, res.Result, res.Error)
				}
			case k == 12:
				if r := requireResult(t, res); r.TimeoutMs != 600000 {
					t.Errorf("timeoutMs = %v for a request of 1e12, want the 600000 cap", r.TimeoutMs)
				}
			case k == 13:
				if r := requireResult(t, res); r.TimeoutMs != 120000 {
					t.Errorf("timeoutMs = %v without a request, want the 120000 default", r.TimeoutMs)
				}
			}
		}
		requireAbsent(t, marker)
	})
}
