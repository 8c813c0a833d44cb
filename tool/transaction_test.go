package tool

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/transaction"
)

// TestTransactionOption: a session in a transaction writes there, not to
// the workspace, and its result lists the change; an escalation to
// danger-full-access in it is refused before anyone is asked.
func TestTransactionOption(t *testing.T) {
	e, ws := newExecutor(t, modes.WorkspaceWrite)
	ws, err := filepath.EvalSymlinks(ws)
	require.NoError(t, err)
	// Outside every writable root of the session's commands (not in /tmp).
	txBase, err := os.MkdirTemp("/var/tmp", "dsh-tool-tx-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(txBase) })
	tx, err := transaction.Create(filepath.Join(txBase, "tx"), ws)
	require.NoError(t, err)
	ap := &countingApprover{outcome: AllowedOnce}
	b := newBash(t, Options{Executor: e, Approver: ap, Transaction: func(c call.Context) *transaction.Tx {
		if c.Agent != nil && c.Agent.Session == "in-tx" {
			return tx
		}
		return nil
	}})
	c := call.Context{Agent: &call.Agent{Session: "in-tx", Workspace: ws}}

	r := b.Call(context.Background(), c, args(t, map[string]any{"command": "echo hi > made", "description": "Write a file"}))
	require.False(t, r.IsError, r.Text)
	_, err = os.Lstat(filepath.Join(ws, "made"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the write must land in the transaction")
	v, ok := r.Value.(Value)
	require.True(t, ok)
	require.NotNil(t, v.RunResult)
	assert.Equal(t, []sandbox.Change{{Op: sandbox.ChangeCreated, Path: filepath.Join(ws, "made"), Type: "file", Size: 3, Mode: "0644", Root: ws}}, v.RunResult.Sandbox.Changes)

	r = b.Call(context.Background(), c, args(t, map[string]any{"command": "touch y", "description": "Create a file",
		"sandbox_permissions": "danger-full-access", "justification": "it must write"}))
	assert.True(t, r.IsError)
	assert.Equal(t, "Error: this session's commands run in a transaction: under danger-full-access a command would write to the workspace directly", r.Text)
	assert.Zero(t, ap.calls.Load(), "nobody is asked")

	// Another session runs without one.
	r = b.Call(context.Background(), call.Context{Agent: &call.Agent{Session: "other", Workspace: ws}},
		args(t, map[string]any{"command": "echo hi > direct", "description": "Write a file"}))
	require.False(t, r.IsError, r.Text)
	assert.FileExists(t, filepath.Join(ws, "direct"))
}
