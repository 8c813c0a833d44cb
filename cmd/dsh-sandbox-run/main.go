package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

const (
	name      = "dsh-sandbox-run"
	exitSetup = 125
	killGrace = 3 * time.Second
	usageLine = "usage: dsh-sandbox-run [--mode MODE] [--workspace DIR] [--allow-write DIR]... [--protect PATH]... [--network] [--report FILE] [--quiet] -- COMMAND [ARG...] | --probe [--json]"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type options struct {
	mode       string
	workspace  string
	allowWrite listFlag
	protect    listFlag
	network    bool
	report     string
	quiet      bool
	probe      bool
	json       bool
	args       []string
}

func parse(argv []string) (options, error) {
	var o options
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.mode, "mode", "read-only", "")
	fs.StringVar(&o.workspace, "workspace", "", "")
	fs.Var(&o.allowWrite, "allow-write", "")
	fs.Var(&o.protect, "protect", "")
	fs.BoolVar(&o.network, "network", false, "")
	fs.StringVar(&o.report, "report", "", "")
	fs.BoolVar(&o.quiet, "quiet", false, "")
	fs.BoolVar(&o.probe, "probe", false, "")
	fs.BoolVar(&o.json, "json", false, "")
	if err := fs.Parse(argv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, errors.New(usageLine)
		}
		return o, fmt.Errorf("usage error: %v", err)
	}
	o.args = fs.Args()
	switch {
	case o.probe && (len(o.args) > 0 || o.report != "" || len(o.allowWrite) > 0 || len(o.protect) > 0):
		return o, errors.New("usage error: --probe takes only --json (and --workspace)")
	case o.json && !o.probe:
		return o, errors.New("usage error: --json goes with --probe")
	case !o.probe && len(o.args) == 0:
		return o, errors.New("usage error: missing `-- COMMAND [ARG...]`")
	}
	return o, nil
}

func run(argv []string, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		msg := strings.ReplaceAll(fmt.Sprintf(format, a...), "\n", " ")
		fmt.Fprintf(stderr, "%s: %s\n", name, msg)
		return exitSetup
	}
	o, err := parse(argv)
	if err != nil {
		return fail("%v", err)
	}
	if o.probe {
		return probe(o, stdout, stderr)
	}
	// From here on every failure is also written to --report, when given.
	failReport := func(p modes.Policy, format string, a ...any) int {
		if o.report != "" {
			sandbox.NewReport(p, nil, fmt.Errorf(format, a...)).WriteFile(o.report)
		}
		return fail(format, a...)
	}
	mode, err := modes.Parse(o.mode)
	if err != nil {
		return failReport(modes.Policy{}, "usage error: --mode: %v", err)
	}
	if mode != modes.WorkspaceWrite && (len(o.allowWrite) > 0 || len(o.protect) > 0) {
		return failReport(modes.Policy{Mode: mode}, "usage error: --allow-write and --protect need --mode workspace-write")
	}
	policy, err := modes.Derive(modes.Options{
		Mode: mode, Workspace: o.workspace, AllowWrite: o.allowWrite, Protect: o.protect,
		Network: o.network, TempDir: os.Getenv("TMPDIR"),
	})
	if err != nil {
		return failReport(modes.Policy{Mode: mode, Network: o.network}, "%v", err)
	}
	// Fail before running anything if the report cannot be written.
	if o.report != "" {
		f, err := os.OpenFile(o.report, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fail("cannot write report: %v", err)
		}
		f.Close()
	}
	writeReport := func(res *sandbox.Result, err error) {
		if o.report == "" {
			return
		}
		if werr := sandbox.NewReport(policy, res, err).WriteFile(o.report); werr != nil {
			fmt.Fprintf(stderr, "%s: cannot write report: %v\n", name, werr)
		}
	}

	// Nothing leaked to us may reach the command; orphans come back to us.
	if err := sandbox.CloseOnExecFrom(3); err != nil {
		return failReport(policy, "%v", err)
	}
	if err := sandbox.BecomeSubreaper(); err != nil {
		return failReport(policy, "set child subreaper: %v", err)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)

	cmd := &sandbox.Cmd{Policy: policy, Args: o.args, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if err := cmd.Start(); err != nil {
		writeReport(nil, err)
		fail("%v", err)
		return sandbox.ExitCodeOf(err)
	}
	go forward(cmd, sigs)
	res, err := cmd.Wait()
	sandbox.KillOrphans()
	if err != nil {
		writeReport(nil, err)
		return fail("%v", err)
	}
	if !o.quiet {
		for _, d := range res.Denials {
			fmt.Fprintf(stderr, "%s: %s\n", name, d.Line(policy.Mode))
		}
	}
	writeReport(res, nil)
	return res.ExitCode
}

// forward passes termination signals to the command (so its TERM traps run)
// and kills the whole tree if it has not ended after the grace period.
func forward(cmd *sandbox.Cmd, sigs <-chan os.Signal) {
	var deadline <-chan time.Time
	for {
		select {
		case s := <-sigs:
			cmd.Signal(s)
			if deadline == nil {
				deadline = time.After(killGrace)
			}
		case <-deadline:
			cmd.Kill()
			return
		}
	}
}

func probe(o options, stdout, stderr io.Writer) int {
	ws := o.workspace
	if ws == "" {
		if wd, err := os.Getwd(); err == nil {
			ws = wd
		} else {
			ws = "/"
		}
	}
	r := sandbox.Probe("", ws)
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return exitSetup
		}
	} else {
		r.WriteText(stdout)
	}
	if !r.Confined {
		return exitSetup
	}
	return 0
}
