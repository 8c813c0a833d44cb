//go:build linux

package sandbox

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func canonical(t *testing.T, p string) string {
	t.Helper()
	c, err := filepath.EvalSymlinks(p)
	require.NoError(t, err)
	return c
}

// TestCmdRefusesInvalidPolicy: Start refuses an inconsistent hand-built
// policy with a *SetupError, and the command never runs.
func TestCmdRefusesInvalidPolicy(t *testing.T) {
	ws := canonical(t, t.TempDir())
	out := canonical(t, t.TempDir())
	marker := filepath.Join(out, "marker")
	for name, p := range map[string]modes.Policy{
		"read-only with a writable root": {Mode: modes.ReadOnly, Workspace: ws, WritableRoots: []string{out}},
		"relative root":                  {Mode: modes.WorkspaceWrite, Workspace: ws, WritableRoots: []string{ws, "tmp"}},
		"bad mode":                       {Mode: modes.Mode(5), Workspace: ws},
	} {
		t.Run(name, func(t *testing.T) {
			err := (&Cmd{Policy: p, Args: []string{"touch", marker}}).Start()
			var se *SetupError
			require.True(t, errors.As(err, &se), "got %v", err)
			assert.Contains(t, se.Detail, "invalid policy")
			assert.ErrorIs(t, err, modes.ErrInvalidPolicy)
			assert.NoFileExists(t, marker)
		})
	}
}
