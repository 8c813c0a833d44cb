package tool

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func TestDecodeArgsErrors(t *testing.T) {
	tests := []struct {
		args string
		want string
	}{
		{`{}`, "invalid command: expected a non-empty string"},
		{`{"command": ""}`, "invalid command: expected a non-empty string"},
		{`{"command": "  "}`, "invalid command: expected a non-empty string"},
		{`{"command": 5}`, "invalid command: expected a non-empty string"},
		{`{"command": "ls"}`, "invalid description: expected a non-empty string"},
		{`{"command": "ls", "description": ""}`, "invalid description: expected a non-empty string"},
		{`{"command": "ls", "description": ["x"]}`, "invalid description: expected a non-empty string"},
		{`{"command": "ls", "description": "d", "timeoutMs": 0}`, "invalid timeoutMs: expected a positive number, got 0"},
		{`{"command": "ls", "description": "d", "timeoutMs": -5}`, "invalid timeoutMs: expected a positive number, got -5"},
		{`{"command": "ls", "description": "d", "timeoutMs": "1000"}`, `invalid timeoutMs: expected a positive number, got "1000"`},
		{`{"command": "ls", "description": "d", "timeoutMs": 1e999}`, "invalid timeoutMs: expected a positive number, got 1e999"},
		{`{"command": "ls", "description": "d", "timeoutMs": {"a": 1}}`, `invalid timeoutMs: expected a positive number, got {"a":1}`},
		{`{"command": "ls", "description": "d", "workdir": 3}`, "invalid workdir: expected a string, got 3"},
		{`{"command": "ls", "description": "d", "run_in_background": "yes"}`, `invalid run_in_background: expected a boolean, got "yes"`},
		{`{"command": "ls", "description": "d", "sandbox_permissions": "workspace-write"}`, "invalid escalation: sandbox_permissions requires a justification"},
		{`{"command": "ls", "description": "d", "justification": "because"}`, "invalid escalation: justification is only valid together with sandbox_permissions"},
		{`{"command": "ls", "description": "d", "sandbox_permissions": "workspace-write", "justification": " "}`, "invalid justification: expected a non-empty sentence"},
		{`{"command": "ls", "description": "d", "sandbox_permissions": "workspace-write", "justification": 7}`, "invalid justification: expected a non-empty sentence"},
		{`{"command": "ls", "description": "d", "sandbox_permissions": "read-only", "justification": "j"}`, `invalid sandbox_permissions: expected "workspace-write" or "danger-full-access", got "read-only"`},
		{`{"command": "ls", "description": "d", "sandbox_permissions": "root", "justification": "j"}`, `invalid sandbox_permissions: expected "workspace-write" or "danger-full-access", got "root"`},
		{`[1]`, "invalid arguments: expected a JSON object"},
		{`null`, "invalid arguments: expected a JSON object"},
		{`{"command": "ls"`, "invalid arguments: expected a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			_, err := DecodeArgs(json.RawMessage(tt.args))
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}

func TestDecodeArgs(t *testing.T) {
	a, err := DecodeArgs(json.RawMessage(`{"command":"make test","description":"Run the test suite",
		"timeoutMs":1500.5,"workdir":"pkg","run_in_background":true,
		"sandbox_permissions":"danger-full-access","justification":"needs the network",
		"env":{"A":"1"},"stdin":"x","stdoutMaxBytes":99999999,"dshEnv":{"DSH_HOME":"/evil"},"extra":1}`))
	require.NoError(t, err)
	require.NotNil(t, a.TimeoutMs)
	require.NotNil(t, a.Escalation)
	assert.Equal(t, Args{
		Command: "make test", Description: "Run the test suite", TimeoutMs: a.TimeoutMs, Workdir: "pkg",
		RunInBackground: true, Escalation: a.Escalation, Justification: "needs the network",
	}, a, "unknown and trusted keys are ignored")
	assert.Equal(t, 1500.5, *a.TimeoutMs)
	assert.Equal(t, modes.DangerFullAccess, *a.Escalation)

	a, err = DecodeArgs(json.RawMessage(`{"command":"ls","description":"d","timeoutMs":null,"sandbox_permissions":null,"justification":null}`))
	require.NoError(t, err)
	assert.Nil(t, a.TimeoutMs, "null is absent")
	assert.Nil(t, a.Escalation)
}
