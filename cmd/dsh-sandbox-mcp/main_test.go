package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			o, err := parse(tc.argv)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.True(t, strings.HasPrefix(err.Error(), "usage error: "), err.Error())
				return
			}
			require.NoError(t, err)
			_, err = o.config()
			require.NoError(t, err)
		})
	}
}

func TestConfig(t *testing.T) {
	o, err := parse([]string{"--mode", "workspace-write", "--workspace", "/w", "--allow-write", "/a", "--max-memory", "256M", "--allow-domain", "example.com"})
	require.NoError(t, err)
	cfg, err := o.config()
	require.NoError(t, err)
	assert.Equal(t, modes.WorkspaceWrite, cfg.Mode)
	assert.Equal(t, "/w", cfg.Workspace)
	assert.Equal(t, []string{"/a"}, cfg.WritableRoots)
	assert.Equal(t, modes.Limits{MaxPids: modes.DefaultPids, MaxMemory: 256 << 20}, *cfg.Limits)
	require.NotNil(t, cfg.Allowlist)
	assert.Equal(t, []string{"example.com"}, cfg.Allowlist.Domains)

	o, err = parse(nil)
	require.NoError(t, err)
	cfg, err = o.config()
	require.NoError(t, err)
	assert.Equal(t, modes.ReadOnly, cfg.Mode, "the fail-safe default")
	assert.Nil(t, cfg.Allowlist)

	o, err = parse([]string{"--mode", "everything"})
	require.NoError(t, err)
	_, err = o.config()
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
