package envreg_test

import (
	"context"
	"fmt"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/envreg"
)

// Collect the managed environment of one bash call and hand it to the
// executor (executor.Request.DshEnv).
func ExampleRegistry_Collect() {
	r, err := envreg.New(envreg.Options{Home: "/srv/dsh"})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = r.Register(envreg.SessionPersistence(func(e envreg.Execution) (string, bool) {
		return "/srv/dsh/sessions/" + e.Agent.Session + ".jsonl", true
	}))
	if err != nil {
		fmt.Println(err)
		return
	}

	agent := &call.Agent{Session: "0197-a1", Workspace: "/work"}
	snap, err := r.Collect(context.Background(), envreg.Execution{Agent: agent, CallID: "call-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, kv := range snap.Sorted() {
		fmt.Println(kv)
	}
	dshEnv := snap.Map() // a fresh map: Request{..., DshEnv: dshEnv}
	fmt.Println(len(dshEnv), "variables")

	// Without an agent there is no session.
	snap, _ = r.Collect(context.Background(), envreg.Execution{})
	fmt.Println(snap.Keys())
	// Output:
	// DSH_HOME=/srv/dsh
	// DSH_SESSION_ID=0197-a1
	// DSH_SESSION_JSONL=/srv/dsh/sessions/0197-a1.jsonl
	// DSH_SHELL=1
	// 4 variables
	// [DSH_HOME DSH_SHELL]
}

// Register a contributor; the disposer removes it. Declaring a key is
// owning it: a second owner is refused.
func ExampleRegistry_Register() {
	r, err := envreg.New(envreg.Options{Home: "/srv/dsh"})
	if err != nil {
		fmt.Println(err)
		return
	}
	dispose, err := r.Register(envreg.Contributor{
		Name: "path-dialect",
		Variables: map[string]envreg.Variable{
			"DSH_PATH_DIALECT": {Description: "Path spelling of the shell: posix or windows."},
		},
		Resolve: func(envreg.Execution) (map[string]any, error) {
			return map[string]any{"DSH_PATH_DIALECT": "posix"}, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	_, err = r.Register(envreg.Contributor{
		Name:      "rival",
		Variables: map[string]envreg.Variable{"DSH_PATH_DIALECT": {Description: "Mine."}},
		Resolve:   func(envreg.Execution) (map[string]any, error) { return nil, nil },
	})
	fmt.Println(err)
	_, err = r.Register(envreg.Contributor{
		Name:      "greedy",
		Variables: map[string]envreg.Variable{"DSH_HOME": {Description: "Mine."}},
		Resolve:   func(envreg.Execution) (map[string]any, error) { return nil, nil },
	})
	fmt.Println(err)

	snap, _ := r.Collect(context.Background(), envreg.Execution{})
	fmt.Println(snap.Sorted())
	dispose()
	snap, _ = r.Collect(context.Background(), envreg.Execution{})
	fmt.Println(snap.Sorted())
	// Output:
	// bash env key "DSH_PATH_DIALECT" is already owned by contributor "path-dialect"; contributor "rival" cannot also own it
	// bash env contributor "greedy" cannot own reserved key "DSH_HOME"
	// [DSH_HOME=/srv/dsh DSH_PATH_DIALECT=posix DSH_SHELL=1]
	// [DSH_HOME=/srv/dsh DSH_SHELL=1]
}

// Variables lists every managed key with its owner, for documentation.
func ExampleRegistry_Describe() {
	r, _ := envreg.New(envreg.Options{Home: "/srv/dsh"})
	fmt.Print(r.Describe())
	// Output:
	// DSH_HOME (bash-env): Absolute path of the harness home directory (configuration and data).
	// DSH_SESSION_ID (bash-env): Id of the calling agent's session; unset for a call without an agent.
	// DSH_SHELL (bash-env): Always 1: the command runs under the bash tool.
}
