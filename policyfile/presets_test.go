package policyfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTool writes an executable shell script name in dir.
func fakeTool(t *testing.T, dir, name, script string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script), 0o755))
}

// TestResolvePresets: each preset reads the registries from the tool's own
// configuration (fake tools and files here), never a name of its own; a
// missing tool allows nothing and says why.
func TestResolvePresets(t *testing.T) {
	bin, home := t.TempDir(), t.TempDir()
	fakeTool(t, bin, "go", `[ "$1 $2 $3" = "env GOPROXY GOSUMDB" ] || exit 3
printf 'https://proxy.corp.test/go|https://backup.corp.test,direct\nsum.corp.test+abc https://sumdb.corp.test\n'`)
	fakeTool(t, bin, "npm", `echo '{"registry": "https://npm.corp.test/", "@me:registry": "https://scoped.corp.test/x", "cache": "/c"}'`)
	fakeTool(t, bin, "python3", `echo "global.index-url='https://pypi.corp.test/simple'"
echo "user.extra-index-url='https://extra.corp.test/a https://extra2.corp.test/b'"`)
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".cargo"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".cargo", "config.toml"), []byte(`
[source.crates-io]
replace-with = "corp"
[source.corp]
registry = "sparse+https://crates.corp.test/index/"
[registries.other]
index = "https://git.corp.test/index.git"
`), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".m2"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".m2", "settings.xml"), []byte(`<settings>
  <mirrors><mirror><id>corp</id><url>https://maven.corp.test/repo</url><mirrorOf>*</mirrorOf></mirror></mirrors>
</settings>`), 0o644))
	environ := []string{"PATH=" + bin, "HOME=" + home}

	got := map[string]Preset{}
	for _, p := range ResolvePresets(Presets(), environ) {
		got[p.Name] = p
	}
	assert.Equal(t, []string{"proxy.corp.test", "backup.corp.test", "sumdb.corp.test"}, got["go"].Domains)
	assert.Contains(t, got["go"].Note, "direct")
	assert.Equal(t, []string{"npm.corp.test", "scoped.corp.test"}, got["node"].Domains)
	assert.Equal(t, []string{"pypi.corp.test", "extra.corp.test", "extra2.corp.test"}, got["python"].Domains)
	assert.Equal(t, []string{"crates.corp.test", "git.corp.test"}, got["rust"].Domains)
	assert.Empty(t, got["rust"].Note, "crates.io is replaced: nothing to say")
	assert.Equal(t, []string{"maven.corp.test"}, got["java"].Domains)

	// No tool, no file: nothing allowed, a note says why.
	empty := []string{"PATH=" + t.TempDir(), "HOME=" + t.TempDir()}
	for _, p := range ResolvePresets(Presets(), empty) {
		assert.Empty(t, p.Domains, p.Name)
		assert.NotEmpty(t, p.Note, p.Name)
	}
	// A tool that fails says how.
	fakeTool(t, bin, "go", "echo 'go: broken' >&2; exit 1")
	p := ResolvePresets([]string{"go"}, environ)[0]
	assert.Empty(t, p.Domains)
	assert.Contains(t, p.Note, "go: broken")
}

func TestPresetInFile(t *testing.T) {
	dir := t.TempDir()
	f := write(t, dir, "c.toml", "preset = [\"go\", \"cobol\"]\n")
	_, err := Load(Options{UserFile: f})
	var fe *Error
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "preset", fe.Key)
	assert.Contains(t, fe.Error(), `"cobol": not one of go, java, node, python, rust`)
}
