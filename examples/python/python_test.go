package python

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dshSandboxRun is $DSH_SANDBOX_RUN (prebuilt, as make vm-test gives it), or
// dsh-sandbox-run built for this test.
func dshSandboxRun(t *testing.T) string {
	if p := os.Getenv("DSH_SANDBOX_RUN"); p != "" {
		return p
	}
	bin := filepath.Join(t.TempDir(), "dsh-sandbox-run")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/dsh-sandbox/dsh-sandbox/cmd/dsh-sandbox-run")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build dsh-sandbox-run:\n%s", out)
	return bin
}

func python3(t *testing.T) string {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed (make test-deps installs it)")
	}
	return py
}

func TestPythonExample(t *testing.T) {
	py := python3(t)
	bin := dshSandboxRun(t)
	env := append(os.Environ(), "DSH_SANDBOX_RUN="+bin, "PYTHONDONTWRITEBYTECODE=1")

	t.Run("unittest", func(t *testing.T) {
		cmd := exec.Command(py, "-m", "unittest", "-v", "test_dsh_sandbox")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "python3 -m unittest:\n%s", out)
		ran := regexp.MustCompile(`(?m)^Ran (\d+) tests? `).FindSubmatch(out)
		require.NotNil(t, ran, "%s", out)
		assert.NotEqual(t, "0", string(ran[1]), "%s", out)
		assert.Regexp(t, `(?m)^OK`, string(out))
	})

	// The example as a program: a denied write is shown as a fact, and the
	// file does not exist.
	t.Run("program", func(t *testing.T) {
		ws, err := filepath.EvalSymlinks(t.TempDir())
		require.NoError(t, err)
		cmd := exec.Command(py, "dsh_sandbox.py", "--mode", "read-only", "--workspace", ws, "echo hi; echo x > denied.txt")
		cmd.Env = env
		out, err := cmd.Output()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%s", out)
		assert.Equal(t, 1, ee.ExitCode())
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		assert.Equal(t, "hi", lines[0])
		assert.Contains(t, lines, "sandbox: denied write "+filepath.Join(ws, "denied.txt")+" (openat EROFS); allow with --mode workspace-write")
		assert.Regexp(t, `^sandbox: mode: read-only, enforcement: (full|partial)`, lines[1])
		assert.Equal(t, "sandbox: exit code: 1", lines[len(lines)-1])
		assert.Contains(t, string(ee.Stderr), "denied.txt: Read-only file system")
		assert.NoFileExists(t, filepath.Join(ws, "denied.txt"))
	})
}
