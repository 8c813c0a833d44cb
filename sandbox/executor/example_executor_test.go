package executor_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// An Executor runs `bash -c` commands for a harness: here a write inside the
// workspace lands, a write outside it is denied and reported as a fact, and
// the non-zero exit is a result, not an error.
//
// No setup call is needed in main: any binary linking package sandbox is its
// own runner (the runner is C code that runs before the Go runtime when the
// binary is re-executed as "dsh-sandbox-runner"). A harness that prefers an
// installed helper sets Config.Runner to the path of dsh-sandbox-run.
func ExampleExecutor_Run() {
	ws, _ := os.MkdirTemp("", "example-ws")
	defer os.RemoveAll(ws)
	e, err := executor.New(executor.Config{Mode: modes.WorkspaceWrite, Workspace: ws})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()

	res, err := e.Run(context.Background(), executor.Request{
		Command: "echo hello > greeting.txt && cat greeting.txt && echo pwned > /etc/dsh-example",
	})
	if err != nil { // e.g. *executor.SandboxUnavailableError: nothing ran
		fmt.Println(err)
		return
	}
	fmt.Print(res.Stdout.Text)
	fmt.Println("exit code:", res.ExitCode)
	fmt.Println("denied:", res.Sandbox.Denied)
	for _, d := range res.Sandbox.Denials {
		fmt.Println(d.Line(res.Sandbox.Mode))
	}
	// Output:
	// hello
	// exit code: 1
	// denied: true
	// denied write /etc/dsh-example (workspace-write mode); allow with --allow-write /etc
}

// A background command: consuming reads return what is new since the
// previous read; Wait gives the final result once it ends.
func ExampleExecutor_Start() {
	ws, _ := os.MkdirTemp("", "example-ws")
	defer os.RemoveAll(ws)
	e, err := executor.New(executor.Config{Mode: modes.ReadOnly, Workspace: ws})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()

	ctx := context.Background()
	p, err := e.Start(ctx, executor.Request{
		Command: "echo first; read line; echo \"second: $line\"",
		Stdin:   strings.NewReader("from stdin\n"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	p.OnSettled(func(r *executor.RunResult) { fmt.Println("settled, exit code", r.ExitCode) })
	res, _ := p.Wait(ctx)
	fmt.Print(p.Read().Stdout)
	fmt.Println("status:", p.Status(), "mode:", res.Sandbox.Mode)
	fmt.Printf("next read: %q\n", p.Read().Stdout)
	// Output:
	// settled, exit code 0
	// first
	// second: from stdin
	// status: exited mode: read-only
	// next read: ""
}

// With an allowlist the command's only way out is the executor's egress
// proxy, named in its environment; a name the allowlist does not hold is
// refused by the proxy (curl gets a 403 naming it) and reported as a fact.
func ExampleConfig_allowlist() {
	ws, _ := os.MkdirTemp("", "example-ws")
	defer os.RemoveAll(ws)
	e, err := executor.New(executor.Config{Mode: modes.WorkspaceWrite, Workspace: ws,
		Allowlist: &modes.Allowlist{Domains: []string{"registry.npmjs.org", "*.pythonhosted.org"}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()
	res, err := e.Run(context.Background(), executor.Request{
		Command: `test -n "$HTTPS_PROXY" && echo "proxy set"; curl -sS http://evil.example/ | cut -d';' -f1`,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(res.Stdout.Text)
	for _, d := range res.Sandbox.Denials {
		fmt.Println(d.Line(res.Sandbox.Mode))
	}
	// Output:
	// proxy set
	// dsh-sandbox: connect to evil.example:80 denied (workspace-write mode, not in the allowlist)
	// denied connect evil.example:80 (workspace-write mode, not in the allowlist); allow with --allow-domain evil.example
}
