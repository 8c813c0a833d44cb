package tool

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
)

func TestPresent(t *testing.T) {
	args := json.RawMessage(`{"command":"make test","description":"Run the tests","workdir":"pkg"}`)
	call0 := PresentCall(args, "/home/me/ws")
	assert.Equal(t, Card{Command: "make test", Description: "Run the tests", Cwd: "/home/me/ws/pkg", Status: CardStatus{Kind: StatusPending}}, call0)

	tests := []struct {
		name   string
		result call.Result
		output string
		status CardStatus
	}{
		{"success", call.Result{Text: "ok"}, "ok", CardStatus{Kind: StatusSuccess}},
		{"exit code consumed", call.Result{Text: "out\n[stderr]\nerr\n[exit code: 2]"}, "out\n[stderr]\nerr", CardStatus{Kind: StatusExit, ExitCode: 2}},
		{"signal consumed, other markers kept", call.Result{Text: "(no output)\n[timed out after 300ms]\n[killed by signal: SIGTERM]"},
			"(no output)\n[timed out after 300ms]", CardStatus{Kind: StatusSignal, Signal: "SIGTERM"}},
		{"denial marker stays", call.Result{Text: "(no output)\n[sandbox: file access denied under read-only mode]\n[exit code: 1]"},
			"(no output)\n[sandbox: file access denied under read-only mode]", CardStatus{Kind: StatusExit, ExitCode: 1}},
		{"marker alone", call.Result{Text: "[exit code: 7]"}, "", CardStatus{Kind: StatusExit, ExitCode: 7}},
		{"marker not last stays", call.Result{Text: "[exit code: 7]\nmore"}, "[exit code: 7]\nmore", CardStatus{Kind: StatusSuccess}},
		{"error", call.Result{Text: "Error: tool call aborted", IsError: true}, "Error: tool call aborted", CardStatus{Kind: StatusError}},
		{"background", call.Result{Text: "started background task bash-3"}, "started background task bash-3", CardStatus{Kind: StatusBackground}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := PresentResult(args, "/home/me/ws", tt.result)
			assert.Equal(t, tt.output, c.Output)
			assert.Equal(t, tt.status, c.Status)
			assert.Equal(t, "/home/me/ws/pkg", c.Cwd)
			assert.Equal(t, c, PresentResult(args, "/home/me/ws", tt.result), "pure: the same inputs give the same card")
		})
	}
	changed := func(n, dropped int) call.Result {
		rr := &executor.RunResult{}
		for range n {
			rr.Sandbox.Changes = append(rr.Sandbox.Changes, sandbox.Change{Op: sandbox.ChangeCreated, Path: "/ws/f"})
		}
		rr.Sandbox.ChangesDropped = dropped
		return call.Result{Text: "ok", Value: Value{Kind: "foreground", RunResult: rr}}
	}
	for _, tc := range []struct {
		result call.Result
		want   string
	}{
		{changed(0, 0), ""},
		{changed(1, 0), "changed: 1 file"},
		{changed(3, 0), "changed: 3 files"},
		{changed(1000, 25), "changed: 1025 files"},
		{call.Result{Text: "ok", Value: &Value{Kind: "foreground", RunResult: changed(2, 0).Value.(Value).RunResult}}, "changed: 2 files"},
		{call.Result{Text: "ok"}, ""},
	} {
		c := PresentResult(args, "/home/me/ws", tc.result)
		assert.Equal(t, tc.want, c.Changed)
		assert.Equal(t, "ok", c.Output, "the rendered text does not change")
	}
	assert.Equal(t, "/abs", PresentCall(json.RawMessage(`{"workdir":"/abs"}`), "/ws").Cwd)
	assert.Equal(t, "/ws", PresentCall(json.RawMessage(`garbage`), "/ws").Cwd)
}
