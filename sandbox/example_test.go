package sandbox_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/transaction"
)

// A read-only sandbox refuses a write outside the policy and says so as a
// fact, not as a guess from stderr.
func ExampleCmd_Run() {
	ws, _ := os.MkdirTemp("", "example-ws")
	defer os.RemoveAll(ws)
	p, err := modes.Derive(modes.Options{Mode: modes.ReadOnly, Workspace: ws})
	if err != nil {
		fmt.Println(err)
		return
	}
	cmd := &sandbox.Cmd{Policy: p, Args: []string{"bash", "-c", "echo hi > /etc/dsh-example"}}
	res, err := cmd.Run()
	if err != nil {
		fmt.Println("sandbox unavailable:", err)
		return
	}
	fmt.Println("exit code:", res.ExitCode)
	for _, d := range res.Denials {
		fmt.Println(d.Line(p.Mode))
	}
	// Output:
	// exit code: 1
	// denied write /etc/dsh-example (read-only mode); outside the workspace: under workspace-write, --allow-write /etc allows it
}

// Probe tells what this host can enforce, by running `true` under each mode.
func ExampleProbeWith() {
	r := sandbox.ProbeWith(sandbox.ProbeOptions{Workspace: os.TempDir()})
	fmt.Println("confined modes can run:", r.Confined)
	fmt.Println("danger-full-access:", r.Modes["danger-full-access"].Enforcement)
	// Output:
	// confined modes can run: true
	// danger-full-access: none
}

// A result lists what the command changed in its writable roots: facts the
// supervisor observed, not a scan of the workspace.
func ExampleResult_changes() {
	ws, _ := os.MkdirTemp("", "example-ws")
	defer os.RemoveAll(ws)
	os.WriteFile(ws+"/old.txt", []byte("old\n"), 0o644)
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws})
	if err != nil {
		fmt.Println(err)
		return
	}
	cmd := &sandbox.Cmd{Policy: p, Dir: p.Workspace, Args: []string{"bash", "-c", "echo hi > new.txt; mv old.txt kept.txt; mkdir out"}}
	res, err := cmd.Run()
	if err != nil {
		fmt.Println("sandbox unavailable:", err)
		return
	}
	for _, c := range res.Changes {
		rel := func(p string) string { return strings.TrimPrefix(p, p[:len(cmd.Dir)+1]) }
		if c.From != "" {
			fmt.Println(c.Op, rel(c.From), "->", rel(c.Path))
		} else {
			fmt.Println(c.Op, rel(c.Path), c.Type, c.Size)
		}
	}
	// Output:
	// created new.txt file 3
	// renamed old.txt -> kept.txt
	// created out dir 0
}

// A command can run in a transaction: its writes to the workspace land in
// the transaction's directory until it is committed (or discarded).
func ExampleCmd_transaction() {
	ws, _ := os.MkdirTemp("", "example-ws")
	defer os.RemoveAll(ws)
	// The transaction's directory lies outside every writable root of the
	// command (not in /tmp): a command there could change what is committed.
	dir, _ := os.MkdirTemp("/var/tmp", "example-tx")
	defer os.RemoveAll(dir)
	os.WriteFile(ws+"/plan.txt", []byte("draft\n"), 0o644)
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws})
	if err != nil {
		fmt.Println(err)
		return
	}
	tx, err := transaction.Create(dir+"/tx", p.Workspace)
	if err != nil {
		fmt.Println(err)
		return
	}
	cmd := &sandbox.Cmd{Policy: p, Dir: p.Workspace, Transaction: tx,
		Args: []string{"bash", "-c", "echo final > plan.txt; rm -f plan.txt.bak; echo done > log.txt"}}
	res, err := cmd.Run()
	if err != nil {
		fmt.Println("sandbox unavailable:", err)
		return
	}
	for _, c := range res.Changes {
		fmt.Println(c.Op, strings.TrimPrefix(c.Path, p.Workspace+"/"))
	}
	before, _ := os.ReadFile(ws + "/plan.txt")
	fmt.Print("before commit: ", string(before))
	if _, err := tx.Commit(); err != nil {
		fmt.Println(err)
		return
	}
	after, _ := os.ReadFile(ws + "/plan.txt")
	fmt.Print("after commit: ", string(after))
	// Output:
	// created log.txt
	// modified plan.txt
	// before commit: draft
	// after commit: final
}
