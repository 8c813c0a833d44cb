package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// complete sources the bash script and completes words (the last one being
// completed) in dir, returning the candidates.
func complete(t *testing.T, script, dir string, words ...string) []string {
	t.Helper()
	prog := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _dsh_sandbox_run; printf '%s\n' "${COMPREPLY[@]}"`
	cmd := exec.Command("bash", append([]string{"-c", prog, "bash", script}, words...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

func TestCompletionBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"completion", "bash"}, nil, &out, &errb), errb.String())
	script := filepath.Join(dir, "c.bash")
	require.NoError(t, os.WriteFile(script, out.Bytes(), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "srcfile"), nil, 0o644))

	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"dsh-sandbox-run", "--mo"}, []string{"--mode"}},
		{[]string{"dsh-sandbox-run", "--mode", ""}, []string{"read-only", "workspace-write", "danger-full-access"}},
		{[]string{"dsh-sandbox-run", "--mode", "w"}, []string{"workspace-write"}},
		{[]string{"dsh-sandbox-run", "--allow-write", "sr"}, []string{"src"}},
		{[]string{"dsh-sandbox-run", "--report", "sr"}, []string{"src", "srcfile"}},
		{[]string{"dsh-sandbox-run", "--no-c"}, []string{"--no-caches", "--no-config"}},
		{[]string{"dsh-sandbox-run", "po"}, []string{"policy"}},
		{[]string{"dsh-sandbox-run", "completion", ""}, []string{"bash", "zsh", "fish"}},
		{[]string{"dsh-sandbox-run", "--timeout", ""}, nil},
		{[]string{"dsh-sandbox-run", "--", "--mo"}, nil},
	} {
		assert.ElementsMatch(t, tc.want, complete(t, script, dir, tc.words...), "%q", tc.words)
	}
}

// TestCompletionScriptsParse: each shell's script parses in that shell,
// where the shell is installed.
func TestCompletionScriptsParse(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		t.Run(sh, func(t *testing.T) {
			var out, errb bytes.Buffer
			require.Equal(t, 0, run([]string{"completion", sh}, nil, &out, &errb), errb.String())
			assert.Contains(t, out.String(), "dsh-sandbox-run")
			path, err := exec.LookPath(sh)
			if err != nil {
				t.Skipf("%s is not installed: the script was made but not parsed", sh)
			}
			f := filepath.Join(t.TempDir(), "c")
			require.NoError(t, os.WriteFile(f, out.Bytes(), 0o644))
			b, err := exec.Command(path, "-n", f).CombinedOutput()
			assert.NoError(t, err, "%s -n: %s", sh, b)
		})
	}
	var out, errb bytes.Buffer
	assert.Equal(t, exitSetup, run([]string{"completion", "tcsh"}, nil, &out, &errb))
	assert.Equal(t, "dsh-sandbox-run: usage error: completion: \"tcsh\" is not one of bash, zsh, fish\n", errb.String())
}
