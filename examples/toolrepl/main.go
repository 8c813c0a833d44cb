// Command toolrepl is an example harness: it wires a sandbox executor, the
// bash tool, the task tools, the DSH_* environment registry, per-session
// modes and an approver that asks on the terminal, then lets a person type
// tool calls as JSON and see exactly what the model would see.
//
//	go run ./examples/toolrepl --mode workspace-write --workspace .
//
// Input, one per line:
//
//	{"tool":"bash","args":{"command":"ls","description":"List files"}}
//	bash {"command":"echo hi > /etc/x","description":"Try a denied write"}
//	task_output {"task_id":"bash-1","wait":true}
//	:mode read-only        set this session's mode (:mode clear to drop it)
//	:tools                 list the tools with their schemas
//	:prompt                the system prompt section and the policy context
//	:quit
//
// Escalations (sandbox_permissions) are asked on the terminal: y allows the
// one call, n rejects it, anything else cancels.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/envreg"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/tasks"
	"github.com/dsh-sandbox/dsh-sandbox/tool"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "toolrepl:", err)
		os.Exit(1)
	}
}

// inbox holds completion notices until the next call, as a harness would
// add them to the session's next model request.
type inbox struct {
	mu      sync.Mutex
	pending []string
}

func (b *inbox) Notify(owner, text string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = append(b.pending, text)
}

func (b *inbox) drain() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pending
	b.pending = nil
	return p
}

// terminalApprover asks on the terminal, reading the answer from the same
// input as the calls.
type terminalApprover struct {
	in  *bufio.Reader
	out io.Writer
}

func (a terminalApprover) Approve(ctx context.Context, r tool.ApprovalRequest) tool.ApprovalOutcome {
	fmt.Fprint(a.out, approvalPrompt(r))
	line, err := a.in.ReadString('\n')
	if err != nil || ctx.Err() != nil {
		return tool.Cancelled
	}
	switch strings.TrimSpace(strings.ToLower(line)) {
	case "y", "yes":
		return tool.AllowedOnce
	case "n", "no":
		return tool.Rejected
	}
	return tool.Cancelled
}

// approvalPrompt shows the user what exactly they would approve: the
// command, where it runs, the mode change, the model's reason, and what the
// sandbox denied when the command last ran.
func approvalPrompt(r tool.ApprovalRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "approval: session %s, %s call %s asks to run\n", r.Agent.Session, r.Tool, r.CallID)
	fmt.Fprintf(&b, "  command:   %s\n", r.Command)
	fmt.Fprintf(&b, "  about:     %s\n", r.Description)
	fmt.Fprintf(&b, "  in:        %s\n", r.Workdir)
	fmt.Fprintf(&b, "  mode:      %s -> %s\n", r.Current, r.Requested)
	fmt.Fprintf(&b, "  because:   %s\n", r.Justification)
	for i, d := range r.Denials {
		if i == 5 {
			fmt.Fprintf(&b, "  ... and %d more denials\n", len(r.Denials)-i)
			break
		}
		fmt.Fprintf(&b, "  last run:  %s\n", d.Line(r.Current))
	}
	b.WriteString("allow once? [y/n] ")
	return b.String()
}

func run(argv []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("toolrepl", flag.ContinueOnError)
	mode := fs.String("mode", "workspace-write", "the executor's default mode")
	workspace := fs.String("workspace", ".", "the session's workspace")
	session := fs.String("session", "repl", "the session id")
	network := fs.Bool("network", false, "let confined commands use the network")
	if err := fs.Parse(argv); err != nil {
		return err
	}
	m, err := modes.Parse(*mode)
	if err != nil {
		return err
	}
	ws, err := filepath.Abs(*workspace)
	if err != nil {
		return err
	}
	exec, err := executor.New(executor.Config{Mode: m, Workspace: ws, Network: *network})
	if err != nil {
		return err
	}
	defer exec.Close()
	notices := &inbox{}
	rt := tasks.New(tasks.Options{Notifier: notices})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rt.Close(ctx)
	}()
	reg, err := envreg.New(envreg.Options{})
	if err != nil {
		return err
	}
	in := bufio.NewReader(stdin)
	sessions := &tool.SessionModes{}
	bash, err := tool.New(tool.Options{
		Executor: exec, Tasks: rt, Sessions: sessions, Env: tool.RegistryEnv(reg),
		Approver: terminalApprover{in: in, out: stdout},
	})
	if err != nil {
		return err
	}
	tools := map[string]call.Tool{bash.Name(): bash}
	for _, t := range tasks.Tools(rt) {
		tools[t.Name()] = t
	}
	agent := &call.Agent{Session: *session, Workspace: ws}

	fmt.Fprintf(stdout, "toolrepl: session %s, workspace %s, executor mode %s. Type a tool call as JSON, :tools, :prompt, :mode MODE, :quit.\n", agent.Session, ws, m)
	for n := 1; ; n++ {
		fmt.Fprint(stdout, "> ")
		line, err := in.ReadString('\n')
		if errors.Is(err, io.EOF) && strings.TrimSpace(line) == "" {
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		line = strings.TrimSpace(line)
		c := call.Context{Agent: agent, ID: fmt.Sprintf("call-%d", n)}
		switch {
		case line == "":
			continue
		case line == ":quit":
			return nil
		case line == ":tools":
			for _, name := range []string{"bash", "task_output", "task_list", "task_kill", "bash_output", "bash_kill"} {
				fmt.Fprintf(stdout, "## %s\n%s\nschema: %s\n\n", name, tools[name].Description(), tools[name].Schema())
			}
			continue
		case line == ":prompt":
			s := tool.SystemPromptSection()
			fmt.Fprintf(stdout, "[%s, order %d] %s\n%s\n", s.ID, s.Order, s.Text, bash.PolicyContext(c))
			continue
		case strings.HasPrefix(line, ":mode "):
			arg := strings.TrimSpace(strings.TrimPrefix(line, ":mode "))
			if arg == "clear" {
				sessions.ClearSessionMode(agent.Session)
			} else if sm, err := modes.Parse(arg); err != nil {
				fmt.Fprintln(stdout, err)
			} else if err := sessions.SetSessionMode(agent.Session, sm); err != nil {
				fmt.Fprintln(stdout, err)
			}
			fmt.Fprintln(stdout, bash.PolicyContext(c))
			continue
		}
		name, args, err := parseCall(line)
		if err != nil {
			fmt.Fprintln(stdout, err)
			continue
		}
		t, ok := tools[name]
		if !ok {
			fmt.Fprintf(stdout, "unknown tool %q\n", name)
			continue
		}
		for _, notice := range notices.drain() {
			fmt.Fprintf(stdout, "(notice for the next request) %s\n", notice)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt) // ^C aborts the call
		res := t.Call(ctx, c, args)
		stop()
		if name == bash.Name() {
			card := tool.PresentResult(args, ws, res)
			fmt.Fprintf(stdout, "── %s  (%s)  cwd %s  status %s\n", card.Command, card.Description, card.Cwd, status(card.Status))
			if card.Changed != "" {
				fmt.Fprintf(stdout, "── %s\n", card.Changed)
			}
		}
		fmt.Fprintf(stdout, "isError: %v\n%s\n", res.IsError, res.Text)
	}
}

// parseCall accepts {"tool":NAME,"args":{…}} or NAME {…}.
func parseCall(line string) (string, json.RawMessage, error) {
	if strings.HasPrefix(line, "{") {
		var c struct {
			Tool string          `json:"tool"`
			Args json.RawMessage `json:"args"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil || c.Tool == "" {
			return "", nil, fmt.Errorf(`expected {"tool":NAME,"args":{…}} or NAME {…}`)
		}
		if c.Args == nil {
			c.Args = json.RawMessage(`{}`)
		}
		return c.Tool, c.Args, nil
	}
	name, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	if rest == "" {
		rest = "{}"
	}
	return name, json.RawMessage(rest), nil
}

func status(s tool.CardStatus) string {
	switch s.Kind {
	case tool.StatusExit:
		return fmt.Sprintf("exit %d", s.ExitCode)
	case tool.StatusSignal:
		return "signal " + s.Signal
	}
	return string(s.Kind)
}
