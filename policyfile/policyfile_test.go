package policyfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// write writes content to dir/name and returns its path.
func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestLoadBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, profile string
		line                   int
		key, err               string
	}{
		{"unknown key", "mode = \"read-only\"\nallow_wirte = [\"/x\"]\n", "", 2, "allow_wirte", "unknown key"},
		{"unknown key in profile", "[profiles.a]\n\nnetwrok = true\n", "", 3, "profiles.a.netwrok", "unknown key"},
		{"wrong type list", "allow_write = \"/tmp\"\n", "", 1, "allow_write", "wrong type: want an array of strings"},
		{"wrong type bool", "\nnetwork = \"yes\"\n", "", 2, "network", "wrong type: want true or false"},
		{"wrong type int", "max_pids = 1.5\n", "", 1, "max_pids", "wrong type: want an integer"},
		{"wrong type profile", "[profiles.a]\nmode = 3\n", "", 2, "profiles.a.mode", "wrong type: want a string"},
		{"bad mode", "mode = \"everything\"\n", "", 1, "mode", "everything"},
		{"missing dir", "allow_write = [\"/nonexistent-dsh\"]\n", "", 1, "allow_write", "no such file or directory"},
		{"relative path", "allow_write = [\"sub\"]\n", "", 1, "allow_write", "must be absolute or start with ~/"},
		{"bad size", "[profiles.a]\nmax_memory = \"lots\"\n", "", 2, "profiles.a.max_memory", "lots"},
		{"negative pids", "max_pids = -1\n", "", 1, "max_pids", "must be 0 (unlimited) or more"},
		{"bad host", "allow_host = [\"example.com:80\"]\n", "", 1, "allow_host", "not an IP address or localhost"},
		{"bad resolve", "resolve = [\"a\"]\n", "", 1, "resolve", ""},
		{"extends cycle", "[profiles.a]\nextends = \"b\"\n[profiles.b]\nextends = \"a\"\n", "a", 4, "profiles.b.extends", "extends cycle: a → b → a"},
		{"extends unknown", "[profiles.a]\nextends = \"zz\"\n", "a", 2, "profiles.a.extends", `no profile "zz"`},
		{"syntax", "mode = [\n", "", 1, "", "incomplete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := write(t, dir, tc.name+".toml", tc.content)
			_, err := Load(Options{UserFile: f, Profile: tc.profile, Home: dir})
			var fe *Error
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, f, fe.File)
			assert.Equal(t, tc.line, fe.Line)
			assert.Equal(t, tc.key, fe.Key)
			assert.Contains(t, fe.Error(), tc.err)
		})
	}
}

func TestLoadMerge(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(home, "extra"), 0o755))
	user := write(t, dir, "config.toml", `mode = "workspace-write"
allow_domain = ["proxy.golang.org"]
max_cpu = 1

[profiles.node]
allow_domain = ["registry.npmjs.org", "proxy.golang.org"]
max_memory = "2G"

[profiles.web]
extends = "node"
mode = "read-only"
allow_write = ["~/extra"]
network = false
`)
	p, err := Load(Options{UserFile: user, Profile: "web", Home: home})
	require.NoError(t, err)
	assert.Equal(t, "read-only", p.Mode, "the profile's scalar replaces the top level's")
	assert.Equal(t, []string{"proxy.golang.org", "registry.npmjs.org"}, p.AllowDomain, "lists add up, once each")
	assert.Equal(t, []string{filepath.Join(home, "extra")}, p.AllowWrite, "~/ expands")
	assert.Equal(t, "2G", p.MaxMemory)
	require.NotNil(t, p.MaxCPU)
	assert.InDelta(t, 1.0, *p.MaxCPU, 0)
	assert.Equal(t, false, p.Value("network"), "an explicit false is set: it overrides a parent's true")
	assert.Equal(t, []Origin{{File: user, Line: 11, Profile: "web"}}, p.Origins["mode"])
	assert.Equal(t, []Origin{{File: user, Line: 2}, {File: user, Line: 6, Profile: "node"}}, p.Origins["allow_domain"])

	_, err = Load(Options{UserFile: user, Profile: "nope", Home: home})
	assert.ErrorContains(t, err, `profile "nope": not in `+user)
	p, err = Load(Options{UserFile: filepath.Join(dir, "missing.toml")})
	require.NoError(t, err, "a missing user file is no policy file")
	assert.Empty(t, p.Files)
}

func TestProjectTrust(t *testing.T) {
	ws, state, extra := t.TempDir(), t.TempDir(), t.TempDir()
	load := func() *Policy {
		t.Helper()
		p, err := Load(Options{ProjectDir: ws, TrustDir: state})
		require.NoError(t, err)
		return p
	}
	assert.Empty(t, load().Untrusted, "no project file")

	write(t, ws, ProjectFile, "allow_write = [\""+extra+"\"]\n")
	p := load()
	assert.Empty(t, p.AllowWrite, "never trusted: not applied")
	assert.Contains(t, p.Untrusted, "is not trusted (never trusted); to apply it, run: dsh-sandbox-run trust --workspace "+ws)

	path, sum, err := Trust(state, ws, "")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(ws, ProjectFile), path)
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, sum)
	p = load()
	assert.Empty(t, p.Untrusted)
	assert.Equal(t, []string{extra}, p.AllowWrite)
	assert.Equal(t, []string{path}, p.Files)

	write(t, ws, ProjectFile, "allow_write = [\""+extra+"\"]\nnetwork = true\n")
	p = load()
	assert.False(t, p.IsSet("network"), "changed since trusted: not applied")
	assert.Contains(t, p.Untrusted, "changed since it was trusted")

	_, _, err = Trust(state, ws, "")
	require.NoError(t, err)
	assert.True(t, load().IsSet("network"))
	_, err = Revoke(state, ws)
	require.NoError(t, err)
	assert.Contains(t, load().Untrusted, "never trusted")

	// A project file may not move the workspace, and is refused trust when bad.
	write(t, ws, ProjectFile, "workspace = \"/\"\n")
	_, _, err = Trust(state, ws, "")
	var fe *Error
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "workspace", fe.Key)
}

func TestProjectFileNeverThroughSymlink(t *testing.T) {
	ws, state, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	target := write(t, elsewhere, "policy.toml", "network = true\n")
	require.NoError(t, os.Symlink(target, filepath.Join(ws, ProjectFile)))
	_, _, err := ReadProject(ws)
	assert.ErrorContains(t, err, "symlink")
	_, _, err = Trust(state, ws, "")
	assert.ErrorContains(t, err, "symlink")
	p, err := Load(Options{ProjectDir: ws, TrustDir: state})
	require.NoError(t, err)
	assert.False(t, p.IsSet("network"))
	assert.Contains(t, p.Untrusted, "is not applied: it is a symlink")

	require.NoError(t, os.Remove(filepath.Join(ws, ProjectFile)))
	require.NoError(t, os.Mkdir(filepath.Join(ws, ProjectFile), 0o755))
	_, _, err = ReadProject(ws)
	assert.ErrorContains(t, err, "not a regular file")
}

func TestDirs(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		env           map[string]string
		config, state string
	}{
		{map[string]string{"HOME": "/h"}, "/h/.config/dsh-sandbox", "/h/.local/state/dsh-sandbox"},
		{map[string]string{"HOME": "/h", "XDG_CONFIG_HOME": "/c", "XDG_STATE_HOME": "/s"}, "/c/dsh-sandbox", "/s/dsh-sandbox"},
		{map[string]string{"HOME": "/h", "XDG_CONFIG_HOME": "rel"}, "/h/.config/dsh-sandbox", "/h/.local/state/dsh-sandbox"},
		{map[string]string{}, "", ""},
	} {
		c, s := Dirs(env(tc.env))
		assert.Equal(t, tc.config, c)
		assert.Equal(t, tc.state, s)
	}
}

func TestSettingsConfig(t *testing.T) {
	yes := true
	pids := 10
	s := Settings{Mode: "workspace-write", AllowWrite: []string{"/x"}, AllowDomain: []string{"example.com"},
		AllowHost: []string{"localhost:5432"}, NoCaches: &yes, MaxPids: &pids}
	c, err := s.Config()
	require.NoError(t, err)
	assert.Equal(t, "workspace-write", c.Mode.String())
	assert.Equal(t, []string{"/x"}, c.AllowWrite)
	require.NotNil(t, c.Allowlist)
	assert.Equal(t, []string{"example.com"}, c.Allowlist.Domains)
	assert.Len(t, c.Allowlist.Hosts, 1)
	assert.True(t, c.NoCaches)
	require.NotNil(t, c.Limits)
	assert.Equal(t, 10, c.Limits.MaxPids)

	_, err = (&Settings{Mode: "x"}).Config()
	assert.Error(t, err)
}
