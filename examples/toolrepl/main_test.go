package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A scripted session: a denied write, an approved escalation, a background
// task read to its end, a session mode change and the prompt texts.
func TestSession(t *testing.T) {
	ws := t.TempDir()
	script := strings.Join([]string{
		`bash {"command":"echo hi > f.txt","description":"Write a file"}`,
		`bash {"command":"echo hi > f.txt","description":"Write a file","sandbox_permissions":"workspace-write","justification":"The file is the deliverable."}`,
		`y`,
		`{"tool":"bash","args":{"command":"echo bg","description":"Echo in background","run_in_background":true}}`,
		`task_output {"task_id":"bash-1","wait":true}`,
		`:mode workspace-write`,
		`:prompt`,
		`nosuch {}`,
		`:quit`,
	}, "\n") + "\n"
	var out bytes.Buffer
	require.NoError(t, run([]string{"--mode", "read-only", "--workspace", ws, "--session", "s1"}, strings.NewReader(script), &out))
	got := out.String()
	assert.Contains(t, got, "[sandbox: file access denied under read-only mode]")
	ws, err := filepath.EvalSymlinks(ws)
	require.NoError(t, err)
	assert.Contains(t, got, "approval: session s1, bash call call-2 asks to run\n"+
		"  command:   echo hi > f.txt\n"+
		"  about:     Write a file\n"+
		"  in:        "+ws+"\n"+
		"  mode:      read-only -> workspace-write\n"+
		"  because:   The file is the deliverable.\n"+
		"  last run:  denied write "+filepath.Join(ws, "f.txt")+" (read-only mode); allow with --mode workspace-write\n"+
		"allow once? [y/n] ")
	assert.Contains(t, got, "started background task bash-1")
	assert.Contains(t, got, "bg\n[status: completed, exit code: 0]")
	assert.Contains(t, got, "Sandbox: bash commands in this session run in workspace-write mode")
	assert.Contains(t, got, "[tool:bash, order 105] Check the [exit code: N] marker on every bash result; investigate failures before moving on.")
	assert.Contains(t, got, `unknown tool "nosuch"`)
	b, err := os.ReadFile(filepath.Join(ws, "f.txt"))
	require.NoError(t, err, got)
	assert.Equal(t, "hi\n", string(b))
}
