package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		err  string // a substring of the error, when refused
	}{
		{"nothing", nil, ""},
		{"policy flags", []string{"--mode", "workspace-write", "--workspace", "/w", "--allow-write", "/a", "--protect", "p", "--unprotect", ".vscode",
			"--deny-read", "/d", "--allow-read", "/r", "--max-pids", "64", "--max-memory", "1G", "--max-cpu", "2", "--no-background"}, ""},
		{"allowlist", []string{"--allow-domain", "example.com", "--deny-domain", "bad.example.com", "--allow-host", "localhost:5432", "--resolve", "x.test=127.0.0.1"}, ""},
		{"http loopback", []string{"--http", "127.0.0.1:8765"}, ""},
		{"http localhost", []string{"--http", "localhost:0"}, ""},
		{"http ipv6 loopback", []string{"--http", "[::1]:8765"}, ""},
		{"http remote", []string{"--http", "0.0.0.0:8765"}, "refusing to listen on 0.0.0.0:8765: not a loopback address (--http-allow-remote allows it"},
		{"http all interfaces", []string{"--http", ":8765"}, "refusing to listen on :8765: not a loopback address"},
		{"http a name", []string{"--http", "example.com:80"}, "not a loopback address"},
		{"http remote allowed", []string{"--http", "0.0.0.0:8765", "--http-allow-remote"}, ""},
		{"http no port", []string{"--http", "127.0.0.1"}, "--http 127.0.0.1: address 127.0.0.1: missing port in address"},
		{"allow-remote alone", []string{"--http-allow-remote"}, "--http-allow-remote goes with --http"},
		{"argument", []string{"--network", "false"}, `unexpected argument "false"`},
		{"unknown flag", []string{"--bogus"}, "unknown flag: --bogus"},
		{"network and allowlist", []string{"--network", "--allow-domain", "x.com"}, "--network allows everything: give one or the other"},
		{"deny-domain alone", []string{"--deny-domain", "x.com"}, "refine an allowlist"},
		{"bad memory", []string{"--max-memory", "lots"}, "--max-memory"},
		{"negative pids", []string{"--max-pids", "-1"}, "max-pids must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseArgs(tc.argv)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.True(t, strings.HasPrefix(err.Error(), "usage error: "), err.Error())
				return
			}
			require.NoError(t, err)
			_, err = o.config(noEnv)
			require.NoError(t, err)
		})
	}
}

func TestConfig(t *testing.T) {
	o, err := parseArgs([]string{"--mode", "workspace-write", "--workspace", "/w", "--allow-write", "/a", "--max-memory", "256M", "--allow-domain", "example.com"})
	require.NoError(t, err)
	cfg, err := o.config(noEnv)
	require.NoError(t, err)
	assert.Equal(t, modes.WorkspaceWrite, cfg.Mode)
	assert.Equal(t, "/w", cfg.Workspace)
	assert.Equal(t, []string{"/a"}, cfg.AllowWrite)
	assert.Equal(t, modes.Limits{MaxPids: modes.DefaultPids, MaxMemory: 256 << 20}, *cfg.Limits)
	require.NotNil(t, cfg.Allowlist)
	assert.Equal(t, []string{"example.com"}, cfg.Allowlist.Domains)

	o, err = parseArgs(nil)
	require.NoError(t, err)
	cfg, err = o.config(noEnv)
	require.NoError(t, err)
	assert.Equal(t, modes.ReadOnly, cfg.Mode, "the fail-safe default")
	assert.Nil(t, cfg.Allowlist)
	assert.Equal(t, executor.DefaultTimeout, cfg.DefaultTimeout, "the contract's default")
	assert.Equal(t, executor.DefaultMaxTimeout, cfg.MaxTimeout)

	o, err = parseArgs([]string{"--timeout-default", "5m", "--timeout-max", "1800000"})
	require.NoError(t, err)
	cfg, err = o.config(noEnv)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Minute, cfg.DefaultTimeout)
	assert.Equal(t, 30*time.Minute, cfg.MaxTimeout)
	for argv, want := range map[string]string{
		"--timeout-default 15m":   "--timeout-default (900000 ms) is over --timeout-max (600000 ms)",
		"--timeout-max 0":         "--timeout-max must be a positive duration, got 0 ms",
		"--timeout-default later": `"later": want a duration (5s, 1500ms, 2m) or milliseconds`,
		"--timeout-defualt 5m":    "(did you mean --timeout-default?)",
	} {
		_, err = parseArgs(strings.Fields(argv))
		assert.ErrorContains(t, err, want, argv)
	}

	o, err = parseArgs([]string{"--mode", "everything"})
	require.NoError(t, err)
	_, err = o.config(noEnv)
	assert.ErrorContains(t, err, "usage error: --mode")
}

func TestRunUsage(t *testing.T) {
	for _, tc := range []struct {
		argv   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"--help"}, 0, "usage: dsh-sandbox-mcp [OPTION]...", ""},
		{[]string{"--version"}, 0, "dsh-sandbox-mcp ", ""},
		{[]string{"--http", "0.0.0.0:1"}, 2, "", "dsh-sandbox-mcp: usage error: refusing to listen on 0.0.0.0:1"},
		{[]string{"--mode", "x"}, 2, "", "dsh-sandbox-mcp: usage error: --mode"},
		{[]string{"--workspace", "/nonexistent-dsh-mcp-ws"}, 2, "", "dsh-sandbox-mcp: mcpserver: sandbox: config:"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.argv, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
		assert.Equal(t, tc.code, code, tc.argv)
		assert.True(t, strings.HasPrefix(stdout.String(), tc.stdout), "%v: stdout %q", tc.argv, stdout.String())
		assert.True(t, strings.HasPrefix(stderr.String(), tc.stderr), "%v: stderr %q", tc.argv, stderr.String())
		if tc.code != 0 {
			assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
		}
	}
}

// TestShowToken: a generated token goes on stderr only when stderr is a
// terminal; otherwise into a 0600 file in a 0700 ~/.local/state/dsh-sandbox,
// which every confined command has hidden, and stderr (a log a command may
// read) gets only its path. A symlink planted at the file is replaced,
// never followed; a home inside a writable root of the commands is refused.
func TestShowToken(t *testing.T) {
	const token = "generated-token-0123456789abcdef"
	outside := func(t *testing.T) string { // not under /tmp: a writable root
		d, err := os.MkdirTemp("/var/tmp", "dsh-mcp-home-")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(d) })
		d, err = filepath.EvalSymlinks(d)
		require.NoError(t, err)
		return d
	}
	ws := t.TempDir()

	t.Run("not a terminal", func(t *testing.T) {
		home := outside(t)
		var stderr bytes.Buffer
		file, err := showToken(token, 8765, tokenSource{home: home, workspace: ws}, &stderr)
		require.NoError(t, err)
		assert.NotContains(t, stderr.String(), token, "the token must not reach stderr")
		want := filepath.Join(home, ".local/state/dsh-sandbox/mcp-8765.token")
		assert.Equal(t, want, file)
		assert.Contains(t, stderr.String(), "the generated token is in "+want)
		assert.Equal(t, 1, strings.Count(stderr.String(), "\n"))
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.Equal(t, token+"\n", string(b))
		fi, err := os.Stat(file)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		di, err := os.Stat(filepath.Dir(file))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())
		p, err := modes.Derive(modes.Options{Mode: modes.ReadOnly, Workspace: ws, Homes: []string{home}})
		require.NoError(t, err)
		assert.True(t, p.Masks(file), "a confined command cannot read %s", file)
	})
	t.Run("a symlink at the file is replaced", func(t *testing.T) {
		home := outside(t)
		dir := filepath.Join(home, modes.HomeStateDir)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		victim := filepath.Join(home, "victim")
		require.NoError(t, os.WriteFile(victim, []byte("keep\n"), 0o644))
		require.NoError(t, os.Symlink(victim, filepath.Join(dir, "mcp-1.token")))
		file, err := showToken(token, 1, tokenSource{home: home, workspace: ws}, io.Discard)
		require.NoError(t, err)
		b, _ := os.ReadFile(victim)
		assert.Equal(t, "keep\n", string(b))
		fi, err := os.Lstat(file)
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular())
		di, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), di.Mode().Perm(), "the directory is made private")
	})
	t.Run("terminal", func(t *testing.T) {
		home := outside(t)
		tty, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
		if err != nil {
			t.Skipf("no pty: %v", err)
		}
		defer tty.Close()
		require.True(t, isTerminal(tty))
		file, err := showToken(token, 2, tokenSource{home: home, workspace: ws}, tty)
		require.NoError(t, err)
		assert.Empty(t, file)
		_, err = os.Stat(filepath.Join(home, modes.HomeStateDir))
		assert.ErrorIs(t, err, os.ErrNotExist, "no file when the terminal shows it")
	})
	t.Run("home in a writable root", func(t *testing.T) {
		var stderr bytes.Buffer
		home := t.TempDir() // under /tmp
		_, err := showToken(token, 3, tokenSource{home: home, workspace: ws}, &stderr)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "lies in the writable root")
		assert.Contains(t, err.Error(), "set "+tokenEnv)
		assert.NotContains(t, stderr.String()+err.Error(), token)
	})
	t.Run("no home", func(t *testing.T) {
		_, err := showToken(token, 4, tokenSource{workspace: ws}, io.Discard)
		assert.ErrorContains(t, err, "$HOME is not an absolute path")
	})
}

// parseArgs parses argv with an empty environment: no home, so no user
// policy file.
func parseArgs(argv []string) (options, error) {
	return parse(argv, noEnv)
}

// noEnv is an empty environment.
func noEnv(string) string { return "" }
