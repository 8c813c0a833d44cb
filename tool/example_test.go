package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/tasks"
	"github.com/dsh-sandbox/dsh-sandbox/tool"
)

// The model's call is denied in read-only; its same-turn retry with
// sandbox_permissions is approved once and lands; the session stays
// read-only.
func ExampleBash_Call() {
	ws, _ := os.MkdirTemp("", "example-ws")
	defer os.RemoveAll(ws)
	exec, err := executor.New(executor.Config{Mode: modes.ReadOnly, Workspace: ws})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer exec.Close()
	approve := tool.ApproverFunc(func(ctx context.Context, r tool.ApprovalRequest) tool.ApprovalOutcome {
		fmt.Println("asked:", r.Reason)
		return tool.AllowedOnce
	})
	bash, _ := tool.New(tool.Options{Executor: exec, Approver: approve})
	c := call.Context{Agent: &call.Agent{Session: "s1", Workspace: ws}, ID: "call-1"}

	res := bash.Call(context.Background(), c, json.RawMessage(`{"command":"echo hi > note.txt","description":"Write a note"}`))
	fmt.Println(res.Text)
	res = bash.Call(context.Background(), c, json.RawMessage(`{"command":"echo hi > note.txt","description":"Write a note",
		"sandbox_permissions":"workspace-write","justification":"The note is what the user asked for."}`))
	fmt.Println(res.Text)
	b, _ := os.ReadFile(ws + "/note.txt")
	fmt.Printf("note.txt: %q\n", b)
	// Output:
	// [stderr]
	// bash: line 1: note.txt: Read-only file system
	// [sandbox: file access denied under read-only mode]
	// [sandbox: escalation available — retry this exact command once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]
	// [exit code: 1]
	// asked: escalate sandbox to workspace-write: The note is what the user asked for.
	// (no output)
	// note.txt: "hi\n"
}

// A background command through the task tools: started, waited for with
// task_output, listed.
func ExampleBash_Call_background() {
	ws, _ := os.MkdirTemp("", "example-ws")
	defer os.RemoveAll(ws)
	exec, err := executor.New(executor.Config{Mode: modes.WorkspaceWrite, Workspace: ws})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer exec.Close()
	rt := tasks.New(tasks.Options{})
	defer rt.Close(context.Background())
	bash, _ := tool.New(tool.Options{Executor: exec, Tasks: rt})
	c := call.Context{Agent: &call.Agent{Session: "s1", Workspace: ws}}
	ctx := context.Background()

	res := bash.Call(ctx, c, json.RawMessage(`{"command":"echo building; sleep 0.2; echo done","description":"Build in background","run_in_background":true}`))
	fmt.Println(res.Text)
	tools := map[string]call.Tool{}
	for _, t := range tasks.Tools(rt) {
		tools[t.Name()] = t
	}
	fmt.Println(tools["task_output"].Call(ctx, c, json.RawMessage(`{"task_id":"bash-1","wait":true}`)).Text)
	fmt.Println(tools["task_list"].Call(ctx, c, json.RawMessage(`{}`)).Text)
	// Output:
	// started background task bash-1
	// building
	// done
	// [status: completed, exit code: 0]
	// bash-1 [bash] completed — Build in background
}
