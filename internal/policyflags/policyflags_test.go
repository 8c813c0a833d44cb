package policyflags

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func parse(t *testing.T, argv ...string) (*Policy, *pflag.FlagSet) {
	t.Helper()
	var p Policy
	fs := NewFlagSet("test")
	p.AddPolicyFlags(fs, Defaults{Mode: "read-only", Workspace: "here"})
	p.AddLimitFlags(fs)
	p.AddFileFlags(fs)
	require.NoError(t, fs.Parse(argv))
	return &p, fs
}

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		argv   []string
		limits modes.Limits
		err    string
	}{
		{"defaults", nil, modes.DefaultLimits(), ""},
		{"limits given", []string{"--max-pids", "5", "--max-memory", "1G", "--max-cpu", "0.5"}, modes.Limits{MaxPids: 5, MaxMemory: 1 << 30, MaxCPU: 0.5}, ""},
		{"unlimited", []string{"--max-pids", "0", "--max-memory", "0"}, modes.Limits{}, ""},
		{"bad size", []string{"--max-memory", "x"}, modes.Limits{}, `usage error: --max-memory: invalid resource limit: size "x"`},
		{"negative cpu", []string{"--max-cpu", "-1"}, modes.Limits{}, "usage error: --max-*: "},
		{"network and allowlist", []string{"--network", "--allow-host", "localhost:1"}, modes.DefaultLimits(), "give one or the other"},
		{"resolve alone", []string{"--resolve", "a=127.0.0.1"}, modes.DefaultLimits(), "usage error: --deny-domain and --resolve refine an allowlist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, fs := parse(t, tc.argv...)
			err := p.CheckLimits(fs)
			if err == nil {
				err = p.CheckNetwork()
			}
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.limits, p.Limits)
		})
	}
}

func TestAllowlist(t *testing.T) {
	p, _ := parse(t)
	al, err := p.Allowlist(func(string) string { return "" })
	require.NoError(t, err)
	assert.Nil(t, al, "no allowlist without --allow-domain or --allow-host")

	p, _ = parse(t, "--allow-domain", "*.example.com", "--deny-domain", "x.example.com", "--allow-host", "localhost:5432", "--resolve", "r.test=127.0.0.1,::1")
	al, err = p.Allowlist(func(string) string { return "" })
	require.NoError(t, err)
	assert.Equal(t, []string{"*.example.com"}, al.Domains)
	assert.Equal(t, []string{"x.example.com"}, al.Deny)
	require.Len(t, al.Hosts, 1)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}, al.Resolve["r.test"])

	p, _ = parse(t, "--allow-host", "example.com:80")
	_, err = p.Allowlist(func(string) string { return "" })
	assert.Error(t, err, "a host that is not loopback")
}

// TestUserFileSymlinkRefused: the default user file is never read through
// a symlink (what it points to may lie in a writable root); --config FILE
// names one explicitly.
func TestUserFileSymlinkRefused(t *testing.T) {
	home, elsewhere := t.TempDir(), t.TempDir()
	dir := filepath.Join(home, ".config", "dsh-sandbox")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	target := filepath.Join(elsewhere, "policy.toml")
	require.NoError(t, os.WriteFile(target, []byte("mode = \"workspace-write\"\n"), 0o644))
	require.NoError(t, os.Symlink(target, filepath.Join(dir, "config.toml")))
	getenv := func(k string) string { return map[string]string{"HOME": home}[k] }

	p, fs := parse(t, "--workspace", elsewhere)
	_, err := p.LoadFiles(fs, getenv)
	assert.ErrorContains(t, err, "config.toml is a symlink: a confined command could change what it points to")

	p, fs = parse(t, "--workspace", elsewhere, "--config", target)
	_, err = p.LoadFiles(fs, getenv)
	require.NoError(t, err)
	assert.Equal(t, "workspace-write", p.Mode)
}
