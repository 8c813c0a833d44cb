package tasks_test

import (
	"context"
	"fmt"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/tasks"
)

// job is a minimal Handle: its output is fixed and it ends when done is
// closed.
type job struct {
	out  string
	done chan struct{}
}

func (j *job) Read() string          { o := j.out; j.out = ""; return o }
func (j *job) Cancel()               {}
func (j *job) Done() <-chan struct{} { return j.done }
func (j *job) Outcome() tasks.Outcome {
	return tasks.Outcome{Status: tasks.StatusCompleted, Detail: "exit code: 0"}
}

// Tasks belong to the session that started them: another session cannot
// read them.
func ExampleRuntime() {
	rt := tasks.New(tasks.Options{})
	alice := call.Context{Agent: &call.Agent{Session: "alice"}}
	bob := call.Context{Agent: &call.Agent{Session: "bob"}}

	j := &job{out: "hello", done: make(chan struct{})}
	id, _ := rt.Start(alice.Owner(), "bash", "Say hello", func(string) (tasks.Handle, error) { return j, nil })
	close(j.done)

	res, _ := rt.Output(context.Background(), alice, id, true, nil)
	fmt.Println(res.Text)
	_, err := rt.Output(context.Background(), bob, id, false, nil)
	fmt.Println(err)
	fmt.Println(rt.List(alice))
	// Output:
	// hello
	// [status: completed, exit code: 0]
	// task bash-1 belongs to another session
	// bash-1 [bash] completed — Say hello
}
