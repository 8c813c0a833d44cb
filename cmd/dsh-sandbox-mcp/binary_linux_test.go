//lint:file-ignore SA1019 a test here drives the roots feature the server uses (see mcpserver/roots.go).

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testhost"
	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

// The tests below build the server binary and drive it over stdio on the
// real kernel, as root (when the test process is root) and as the
// unprivileged DSH_TEST_USER (default dshtest; a missing one is a failure
// with CI=true or DSH_TEST_USER set, else a skip that says so).

const (
	testPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	denied   = "[sandbox: file access denied under workspace-write mode]"
	justify  = "The test asks for a file outside the workspace."
)

var (
	buildOnce sync.Once
	binPath   string
	buildDir  string // the directory serverBin built into, removed at the end
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// serverBin builds dsh-sandbox-mcp once, into a directory every identity
// can read.
func serverBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		// make vm-test builds the binaries on the host (the guest has no
		// module cache): DSH_IT_BIN names their directory.
		if prebuilt := os.Getenv("DSH_IT_BIN"); prebuilt != "" {
			binPath = filepath.Join(prebuilt, name)
			if _, err := os.Stat(binPath); err != nil {
				buildErr = fmt.Errorf("DSH_IT_BIN is set but holds no %s: %w", name, err)
			}
			return
		}
		dir, err := os.MkdirTemp("", "dsh-mcp-bin-")
		buildDir = dir
		if err == nil {
			err = os.Chmod(dir, 0o755)
		}
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("dsh-sandbox-mcp did not build: %v", buildErr)
	}
	return binPath
}

type identity struct {
	name     string // "root" or "user"
	uid, gid int
	home     string
	switchTo bool
}

// forEachIdentity runs f as root (when the test runs as root) and as the
// unprivileged test user (or the current user when not root).
func forEachIdentity(t *testing.T, f func(t *testing.T, id identity)) {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Run("root", func(t *testing.T) { f(t, identity{name: "root", home: "/root"}) })
	}
	t.Run("user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			u, err := user.Current()
			require.NoError(t, err)
			f(t, identity{name: "user", uid: os.Getuid(), gid: os.Getgid(), home: u.HomeDir})
			return
		}
		u := testhost.TestUser(t)
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		f(t, identity{name: "user", uid: uid, gid: gid, home: u.HomeDir, switchTo: true})
	})
}

func (id identity) env() []string {
	return []string{"PATH=" + testPATH, "HOME=" + id.home, "LANG=C", "LC_ALL=C"}
}

// dir makes a fresh directory under parent owned by the identity.
func (id identity) dir(t *testing.T, parent, pattern string) string {
	t.Helper()
	d, err := os.MkdirTemp(parent, pattern)
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	require.NoError(t, os.Chmod(d, 0o755))
	if id.switchTo {
		require.NoError(t, os.Chown(d, id.uid, id.gid))
	}
	d, err = filepath.EvalSymlinks(d)
	require.NoError(t, err)
	return d
}

// outside is a directory outside every writable root.
func (id identity) outside(t *testing.T) string {
	parent := "/var/tmp"
	if id.name == "root" {
		parent = "/var/lib"
	}
	return id.dir(t, parent, "dsh-mcp-out-")
}

// command is the server started as the identity, in workspace-write over ws.
func (id identity) command(t *testing.T, ws string, extra ...string) *exec.Cmd {
	cmd := exec.Command(serverBin(t), append([]string{"--mode", "workspace-write", "--workspace", ws}, extra...)...)
	cmd.Dir = ws
	cmd.Env = id.env()
	if id.switchTo {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(id.uid), Gid: uint32(id.gid), Groups: []uint32{}}}
	}
	return cmd
}

// session connects a Go SDK client to the server process over its stdio.
type session struct {
	cs   *mcp.ClientSession
	cmd  *exec.Cmd
	in   io.WriteCloser
	errs *bytes.Buffer
	mu   sync.Mutex
	asks []string
}

func start(t *testing.T, cmd *exec.Cmd, answer string, roots ...*mcp.Root) *session {
	t.Helper()
	s := &session{cmd: cmd, errs: &bytes.Buffer{}}
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = s.errs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	s.in = in
	opts := &mcp.ClientOptions{}
	if answer != "" {
		opts.ElicitationHandler = func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			s.mu.Lock()
			s.asks = append(s.asks, r.Params.Message)
			s.mu.Unlock()
			return &mcp.ElicitResult{Action: answer}, nil
		}
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "go-test-client", Version: "1"}, opts)
	cl.AddRoots(roots...)
	ctx, cancel := context.WithTimeout(context.Background(), testtime.Scale(20*time.Second))
	defer cancel()
	s.cs, err = cl.Connect(ctx, &mcp.IOTransport{Reader: out, Writer: in}, nil)
	require.NoError(t, err, "stderr: %s", s.errs)
	return s
}

func (s *session) bash(t *testing.T, command string, kv ...any) (string, bool) {
	t.Helper()
	args := map[string]any{"command": command, "description": "Run a test command"}
	for i := 0; i+1 < len(kv); i += 2 {
		args[kv[i].(string)] = kv[i+1]
	}
	return s.call(t, "bash", args)
}

func (s *session) call(t *testing.T, tool string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testtime.Scale(60*time.Second))
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, "stderr: %s", s.errs)
	require.NotEmpty(t, res.Content)
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

// exit waits for the server to exit and returns its status.
func (s *session) exit(t *testing.T) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(testtime.Scale(30 * time.Second)):
		s.cmd.Process.Kill()
		t.Fatalf("the server did not exit; stderr: %s", s.errs)
	}
	return s.cmd.ProcessState.ExitCode()
}

func uniqueSleep() string {
	n := time.Now().UnixNano()
	return fmt.Sprintf("%d.%06d", 200+n%700, n/1000%1000000)
}

func waitSleeps(t *testing.T, arg string, want int) {
	t.Helper()
	deadline := time.Now().Add(testtime.Scale(10 * time.Second))
	for testhost.CountProcs(t, "sleep", arg) != want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, want, testhost.CountProcs(t, "sleep", arg), "processes running sleep %s", arg)
}

// TestStdioServer drives the built server over stdio: a command, a
// validation error, a denied write (and the file is not there), an
// escalation accepted through elicitation (the file is), then stdin's end:
// exit 0, and the background task tree is gone.
func TestStdioServer(t *testing.T) {
	testhost.RequireConfined(t)
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws := id.dir(t, "", "dsh-mcp-ws-")
		out := id.outside(t)
		s := start(t, id.command(t, ws), "accept")

		got, isErr := s.bash(t, "id -u; pwd")
		assert.False(t, isErr)
		assert.Equal(t, fmt.Sprintf("%d\n%s", id.uid, ws), got)
		got, isErr = s.bash(t, "")
		assert.True(t, isErr)
		assert.Equal(t, "Error: invalid command: expected a non-empty string", got)

		target := filepath.Join(out, "escalated")
		got, isErr = s.bash(t, "echo x > "+target)
		assert.False(t, isErr)
		assert.Contains(t, got, denied)
		assert.NoFileExists(t, target)
		got, isErr = s.bash(t, "echo x > "+target, "sandbox_permissions", "danger-full-access", "justification", justify)
		assert.False(t, isErr, got)
		assert.Equal(t, "(no output)", got)
		assert.FileExists(t, target, "the approved escalation did not write")
		s.mu.Lock()
		require.Len(t, s.asks, 1)
		assert.Contains(t, s.asks[0], "Command: echo x > "+target+"\n")
		s.mu.Unlock()

		arg := uniqueSleep()
		got, _ = s.bash(t, "exec sleep "+arg, "run_in_background", true)
		assert.Equal(t, "started background task bash-1", got)
		waitSleeps(t, arg, 1)
		require.NoError(t, s.in.Close())
		assert.Equal(t, 0, s.exit(t), "stderr: %s", s.errs)
		assert.Equal(t, 0, testhost.CountProcs(t, "sleep", arg), "a task tree outlived the server")
	})
}

// TestShutdownSignal: SIGTERM kills every task tree and exits 0.
func TestShutdownSignal(t *testing.T) {
	testhost.RequireConfined(t)
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws := id.dir(t, "", "dsh-mcp-ws-")
		s := start(t, id.command(t, ws), "")
		arg := uniqueSleep()
		for i := 1; i <= 2; i++ {
			got, _ := s.bash(t, "sleep "+arg+"; echo never", "run_in_background", true)
			assert.Equal(t, fmt.Sprintf("started background task bash-%d", i), got)
		}
		waitSleeps(t, arg, 2)
		require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
		assert.Equal(t, 0, s.exit(t), "stderr: %s", s.errs)
		assert.Equal(t, 0, testhost.CountProcs(t, "sleep", arg), "a task tree outlived the server")
	})
}

// TestStartedFromRoot: a server started in / (as clients often start
// their servers) with no --workspace does not exit: each session's
// workspace is its client's first file:// root, and a call from a client
// without one is refused, alone, with one line.
func TestStartedFromRoot(t *testing.T) {
	testhost.RequireConfined(t)
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws := id.dir(t, "", "dsh-mcp-ws-")
		serve := func() *exec.Cmd {
			cmd := exec.Command(serverBin(t), "--mode", "workspace-write")
			cmd.Dir, cmd.Env = "/", id.env()
			if id.switchTo {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(id.uid), Gid: uint32(id.gid), Groups: []uint32{}}}
			}
			return cmd
		}
		s := start(t, serve(), "", &mcp.Root{URI: "file://" + ws})
		out, isErr := s.bash(t, "pwd; echo x > made")
		require.False(t, isErr, out)
		assert.Equal(t, ws, strings.TrimSpace(out))
		assert.FileExists(t, filepath.Join(ws, "made"))
		assert.Contains(t, s.errs.String(), "each session's workspace is its client's first file:// root")

		bare := start(t, serve(), "")
		out, isErr = bare.bash(t, "echo x > /tmp/dsh-mcp-no-root")
		assert.True(t, isErr)
		assert.True(t, strings.HasPrefix(out, "Error: no workspace: the server was started in a directory too broad to be one"), out)
		assert.NoFileExists(t, "/tmp/dsh-mcp-no-root")
		out, isErr = s.bash(t, "echo still")
		assert.False(t, isErr, "the other session keeps serving: %s", out)
	})
}

// tsSDKVersion is the pinned version of the TypeScript SDK the real-client
// test installs.
const tsSDKVersion = "1.32.2"

// tsSDK installs the TypeScript SDK into a cache directory (reused across
// runs) and copies the client script testdata/name there; it returns the
// script's path.
func tsSDK(t *testing.T, name string) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := fmt.Sprintf("%s not found (%v): the TypeScript SDK client test needs node and npm", tool, err)
			if os.Getenv("CI") == "true" || os.Getenv("DSH_REQUIRE_LANDLOCK") == "1" {
				t.Fatal(msg)
			}
			t.Skip(msg + "; install them (make test-deps) to run it")
		}
	}
	cache := os.Getenv("DSH_MCP_TS_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir()
		require.NoError(t, err)
		cache = filepath.Join(base, "dsh-sandbox", "mcp-ts-sdk-"+tsSDKVersion)
	}
	require.NoError(t, os.MkdirAll(cache, 0o755))
	pkg := filepath.Join(cache, "node_modules", "@modelcontextprotocol", "sdk", "package.json")
	var installed struct {
		Version string `json:"version"`
	}
	if b, err := os.ReadFile(pkg); err != nil || json.Unmarshal(b, &installed) != nil || installed.Version != tsSDKVersion {
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", cache, "@modelcontextprotocol/sdk@"+tsSDKVersion)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm install: %s", out)
	}
	script, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	// (written only when it differs: make vm-test's guest gets a read-only
	// cache prepared on the host, the scripts included)
	dst := filepath.Join(cache, name)
	if have, err := os.ReadFile(dst); err != nil || !bytes.Equal(have, script) {
		require.NoError(t, os.WriteFile(dst, script, 0o644))
	}
	return dst
}

// TestTypeScriptClient drives the server with the official TypeScript SDK
// client (see testdata/tsclient.mjs).
func TestTypeScriptClient(t *testing.T) {
	testhost.RequireConfined(t)
	script := tsSDK(t, "tsclient.mjs")
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws := id.dir(t, "", "dsh-mcp-ws-")
		out := id.outside(t)
		argv := []string{serverBin(t), "--mode", "workspace-write", "--workspace", ws}
		if id.switchTo {
			if _, err := exec.LookPath("setpriv"); err != nil {
				msg := fmt.Sprintf("setpriv not found (%v): the TypeScript client cannot start the server as the test user", err)
				if os.Getenv("CI") == "true" || os.Getenv("DSH_TEST_USER") != "" {
					t.Fatal(msg)
				}
				t.Skip(msg)
			}
			argv = append([]string{"setpriv", "--reuid", strconv.Itoa(id.uid), "--regid", strconv.Itoa(id.gid), "--clear-groups", "--"}, argv...)
		}
		env := map[string]string{"PATH": testPATH, "HOME": id.home, "LANG": "C"}
		spec, err := json.Marshal(map[string]any{"command": argv, "cwd": ws, "env": env, "outside": out})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), testtime.Scale(120*time.Second))
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", script, string(spec))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "node: %s", stderr.String())

		type result struct {
			IsError bool     `json:"isError"`
			Texts   []string `json:"texts"`
		}
		var got struct {
			ServerVersion struct{ Name string } `json:"serverVersion"`
			Instructions  string                `json:"instructions"`
			Tools         []struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
			Elicits []struct{ Message, Answer string } `json:"elicits"`
			Calls   map[string]result                  `json:"calls"`
		}
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &got), "node printed: %s\nstderr: %s", stdout.String(), stderr.String())
		assert.Equal(t, "dsh-sandbox", got.ServerVersion.Name)
		assert.Contains(t, got.Instructions, "Check the [exit code: N] marker on every bash result")
		var names []string
		for _, tl := range got.Tools {
			names = append(names, tl.Name)
			assert.Contains(t, string(tl.InputSchema), `"type":"object"`)
		}
		assert.ElementsMatch(t, []string{"bash", "task_output", "task_list", "task_kill"}, names)

		target := filepath.Join(out, "ts-escalated")
		for _, tc := range []struct {
			call    string
			want    string
			contain bool
			isError bool
		}{
			{"run", "hello from ts\n" + ws, false, false},
			{"invalid", "Error: invalid command: expected a non-empty string", false, true},
			{"denied", denied, true, false},
			{"accepted", "(no output)", false, false},
			{"declined", `Error: the user rejected escalating this command to "danger-full-access"`, false, true},
			{"background", "started background task bash-1", false, false},
			{"output", "from-background\n[status: completed, exit code: 0]", false, false},
			{"long", "started background task bash-2", false, false},
			{"list", "bash-1 [bash] completed \u2014 Run a test command\nbash-2 [bash] running \u2014 Run a test command", false, false},
			{"kill", "requested cancellation of task bash-2", false, false},
			{"killed", "(no new output)\n[status: killed, signal: SIGTERM]", false, false},
		} {
			r, ok := got.Calls[tc.call]
			if !assert.True(t, ok, tc.call) || !assert.NotEmpty(t, r.Texts, tc.call) {
				continue
			}
			if tc.contain {
				assert.Contains(t, r.Texts[0], tc.want, tc.call)
			} else {
				assert.Equal(t, tc.want, r.Texts[0], tc.call)
			}
			assert.Equal(t, tc.isError, r.IsError, tc.call)
		}
		assert.FileExists(t, target, "the escalation accepted by the TypeScript client did not write")
		assert.NoFileExists(t, filepath.Join(out, "ts-declined"), "a declined escalation ran")
		require.Len(t, got.Elicits, 2)
		assert.Contains(t, got.Elicits[0].Message, "Command: echo x > "+target+"\n")
		assert.Contains(t, got.Elicits[0].Message, "Mode: workspace-write -> danger-full-access\n")
		assert.True(t, strings.HasPrefix(got.Elicits[1].Message, "Allow this command to run once in danger-full-access mode"), got.Elicits[1].Message)
	})
}

// TestTypeScriptClientProgress: a bash call of 70 s through the official
// TypeScript SDK client, with the SDK's default request timeout (60 s):
// with progress asked for (onprogress, resetTimeoutOnProgress) it
// succeeds, the notifications carrying the command's last output line;
// without, the same client times the call out at 60 s, whatever the server
// does. (Root only: the protocol does not depend on who runs the server.)
func TestTypeScriptClientProgress(t *testing.T) {
	testhost.RequireConfined(t)
	t.Parallel()
	script := tsSDK(t, "tsprogress.mjs")
	ws := t.TempDir()
	env := map[string]string{"PATH": testPATH, "HOME": os.Getenv("HOME"), "LANG": "C"}
	long := `for i in $(seq 1 14); do echo "tick $i"; sleep 5; done; echo done`
	spec, err := json.Marshal(map[string]any{"command": []string{serverBin(t), "--mode", "workspace-write", "--workspace", ws},
		"cwd": ws, "env": env, "script": long})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), testtime.Scale(180*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script, string(spec))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "node: %s", stderr.String())
	var got struct {
		DefaultTimeout int `json:"defaultTimeout"`
		Progress       []struct {
			Progress float64 `json:"progress"`
			Message  string  `json:"message"`
		} `json:"progress"`
		WithProgress struct {
			Texts []string `json:"texts"`
			Error string   `json:"error"`
		} `json:"withProgress"`
		Without struct {
			Texts []string `json:"texts"`
			Error string   `json:"error"`
		} `json:"without"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &got), "node printed: %s\nstderr: %s", stdout.String(), stderr.String())
	require.Equal(t, 60000, got.DefaultTimeout, "the SDK's default request timeout")
	require.Empty(t, got.WithProgress.Error, "the call asking for progress failed")
	require.NotEmpty(t, got.WithProgress.Texts)
	assert.True(t, strings.HasSuffix(got.WithProgress.Texts[0], "tick 14\ndone"), got.WithProgress.Texts[0])
	assert.GreaterOrEqual(t, len(got.Progress), 10, "a notification every 5 s for 70 s")
	ticks := map[string]bool{}
	for i, p := range got.Progress {
		assert.Equal(t, float64(i+1), p.Progress)
		assert.Regexp(t, `^tick [0-9]+$`, p.Message, "the output's last line")
		ticks[p.Message] = true
	}
	assert.GreaterOrEqual(t, len(ticks), 8, "the message follows the output: %v", ticks)
	assert.Contains(t, got.Without.Error, "Request timed out", "without progress the default client gives up at 60 s")
}

// bearer adds an Authorization header to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestHTTPServer: --http serves streamable HTTP on loopback, with the
// bearer token of DSH_MCP_TOKEN; SIGTERM ends it with status 0.
func TestHTTPServer(t *testing.T) {
	testhost.RequireConfined(t)
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws := id.dir(t, "", "dsh-mcp-ws-")
		const token = "test-token-0123456789abcdef"
		cmd := id.command(t, ws, "--http", "127.0.0.1:0")
		cmd.Env = append(cmd.Env, tokenEnv+"="+token)
		stderr, err := cmd.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		lines := bufio.NewScanner(stderr)
		require.True(t, lines.Scan(), "no stderr line")
		url, ok := strings.CutPrefix(lines.Text(), name+": serving MCP at ")
		require.True(t, ok, lines.Text())
		go io.Copy(io.Discard, stderr)

		resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a request without the token")

		cl := mcp.NewClient(&mcp.Implementation{Name: "go-http-client", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), testtime.Scale(30*time.Second))
		defer cancel()
		cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
		require.NoError(t, err)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
			"command": "echo over-http; echo ${" + tokenEnv + ":-scrubbed}", "description": "Say hello over HTTP"}})
		require.NoError(t, err)
		require.NotEmpty(t, res.Content)
		assert.Equal(t, "over-http\nscrubbed", res.Content[0].(*mcp.TextContent).Text, "the token must not reach commands")
		cs.Close()

		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(testtime.Scale(30 * time.Second)):
			t.Fatal("the HTTP server did not exit on SIGTERM")
		}
		assert.Equal(t, 0, cmd.ProcessState.ExitCode())
	})
}

// TestHTTPGeneratedTokenHidden: without DSH_MCP_TOKEN and with stderr a log
// file (as MCP clients keep them), the generated token never reaches the
// log: it is in ~/.local/state/dsh-sandbox/mcp-PORT.token, mode 0600, whose
// path the log gives. A confined command that reads the log and the file
// learns nothing of it, and the token works for the client.
func TestHTTPGeneratedTokenHidden(t *testing.T) {
	testhost.RequireConfined(t)
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws := id.dir(t, "", "dsh-mcp-ws-")
		home := id.outside(t)
		logFile := filepath.Join(id.outside(t), "server.log")
		log, err := os.Create(logFile)
		require.NoError(t, err)
		defer log.Close()
		if id.switchTo {
			require.NoError(t, log.Chown(id.uid, id.gid))
		}
		cmd := id.command(t, ws, "--http", "127.0.0.1:0")
		cmd.Env = []string{"PATH=" + testPATH, "HOME=" + home, "LANG=C", "LC_ALL=C"}
		cmd.Stderr = log
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		var url, tokenFile string
		deadline := time.Now().Add(testtime.Scale(30 * time.Second))
		for url == "" {
			b, _ := os.ReadFile(logFile)
			for _, line := range strings.Split(string(b), "\n") {
				if u, ok := strings.CutPrefix(line, name+": serving MCP at "); ok {
					url = u
				}
				if _, rest, ok := strings.Cut(line, "the generated token is in "); ok {
					tokenFile, _, _ = strings.Cut(rest, " ")
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server did not start; its log: %s", b)
			}
			time.Sleep(10 * time.Millisecond)
		}
		require.Equal(t, filepath.Join(home, ".local/state/dsh-sandbox"), filepath.Dir(tokenFile), "log: %s", readLog(logFile))
		b, err := os.ReadFile(tokenFile)
		require.NoError(t, err)
		token := strings.TrimSpace(string(b))
		require.GreaterOrEqual(t, len(token), 16)
		assert.NotContains(t, readLog(logFile), token, "the log holds the token")
		fi, err := os.Stat(tokenFile)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

		cl := mcp.NewClient(&mcp.Implementation{Name: "go-http-client", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), testtime.Scale(30*time.Second))
		defer cancel()
		cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
		require.NoError(t, err)
		script := fmt.Sprintf(`cat %[1]s; cat %[2]s; echo "read $?"; ls -A %[3]s; cat %[3]s/* 2>&1; echo end`, logFile, tokenFile, filepath.Dir(tokenFile))
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": script, "description": "Look for the token"}})
		require.NoError(t, err)
		require.NotEmpty(t, res.Content)
		out := res.Content[0].(*mcp.TextContent).Text
		assert.Contains(t, out, "serving MCP at", "the log is readable")
		assert.Contains(t, out, "end")
		assert.NotContains(t, out, "read 0", "the token file was read")
		assert.NotContains(t, out, token, "a confined command read the token")
		cs.Close()

		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(testtime.Scale(30 * time.Second)):
			t.Fatal("the HTTP server did not exit on SIGTERM")
		}
		assert.Equal(t, 0, cmd.ProcessState.ExitCode(), "log: %s", readLog(logFile))
		_, err = os.Stat(tokenFile)
		assert.ErrorIs(t, err, os.ErrNotExist, "the token file is removed at the end")
	})
}

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
