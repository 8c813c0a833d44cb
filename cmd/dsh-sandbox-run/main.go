package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/transaction"
)

const (
	name      = "dsh-sandbox-run"
	exitSetup = 125
	killGrace = 3000 * time.Millisecond
	// maxDenialLines is how many denial lines are printed; the rest are
	// summed up in one line (and all kept ones are in the report).
	maxDenialLines = 20
)

func main() {
	// Invoked as landlock-run (a symlink to this binary): the upstream
	// launcher's CLI, see landlockrun.go.
	if len(os.Args) > 0 && filepath.Base(os.Args[0]) == llName {
		os.Exit(landlockRun(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// failer returns a function that prints one line "<prog>: <message>" to w
// (a message's newlines become spaces, so it stays one line) and returns
// code: how every setup failure of either CLI ends.
func failer(w io.Writer, prog string, code int) func(format string, a ...any) int {
	return func(format string, a ...any) int {
		msg := strings.ReplaceAll(fmt.Sprintf(format, a...), "\n", " ")
		fmt.Fprintf(w, "%s: %s\n", prog, msg)
		saidLine(code)
		return code
	}
}

func run(argv, environ []string, stdout, stderr io.Writer) int {
	fail := failer(stderr, name, exitSetup)
	if len(argv) > 0 && isTransactionCommand(argv[0]) {
		return transactionCommand(argv, stdout, stderr)
	}
	if len(argv) > 0 && argv[0] == "caches" {
		return cachesCommand(argv, environ, stdout, stderr)
	}
	getenv := func(k string) string { return lookupEnv(environ, k) }
	if len(argv) > 0 && argv[0] == "completion" {
		return completionCommand(argv[1:], stdout, stderr)
	}
	if len(argv) > 0 && argv[0] == "trust" {
		return trustCommand(argv[1:], getenv, stdout, stderr)
	}
	o, err := parse(argv, environ)
	if err != nil {
		return fail("%v", err)
	}
	switch {
	case o.help:
		fmt.Fprint(stdout, o.usage())
		return 0
	case o.version:
		fmt.Fprintln(stdout, versionLine())
		return 0
	case o.probe:
		return probe(o, stdout, stderr)
	case o.policy:
		return printPolicy(o, stdout, stderr)
	}

	if o.files.Untrusted != "" {
		fmt.Fprintf(stderr, "%s: %s\n", name, o.files.Untrusted)
	}
	for _, p := range o.presets {
		if len(p.Domains) == 0 {
			fmt.Fprintf(stderr, "%s: preset %s allows nothing: %s\n", name, p.Name, p.Note)
		}
	}
	// The report is opened now, before anything runs, and only ever written
	// through this descriptor: the command may replace the file's name (say
	// with a symlink to a file of ours) but cannot redirect the write.
	rep, err := openReport(o.report)
	if err != nil {
		return fail("cannot write report: %v", err)
	}
	defer rep.close()
	if rep != nil {
		rep.argv, rep.presets = o.args, o.presets
		rep.cwd, _ = os.Getwd()
	}
	// From here on every failure is also written to the report.
	failReport := func(p modes.Policy, err error) int {
		rep.write(stderr, newReport(p, nil, err))
		return fail("%v", err)
	}
	mode, err := modes.Parse(o.Mode)
	if err != nil {
		return failReport(modes.Policy{}, fmt.Errorf("usage error: --mode: %w", err))
	}
	if mode != modes.WorkspaceWrite && (len(o.AllowWrite) > 0 || len(o.Protect) > 0 || len(o.Unprotect) > 0) {
		return failReport(modes.Policy{Mode: mode}, errors.New("usage error: --allow-write, --protect and --unprotect need --mode workspace-write"))
	}
	if !mode.Confines() && (len(o.DenyRead) > 0 || len(o.AllowRead) > 0) {
		return failReport(modes.Policy{Mode: mode}, errors.New("usage error: --deny-read and --allow-read need a confined mode (danger-full-access hides nothing)"))
	}
	env, err := childEnv(environ, o)
	if err != nil {
		return failReport(modes.Policy{Mode: mode}, err)
	}
	allowlist, err := o.Allowlist(getenv)
	if err != nil {
		return failReport(modes.Policy{Mode: mode}, fmt.Errorf("usage error: %w", err))
	}
	if allowlist != nil && !mode.Confines() {
		return failReport(modes.Policy{Mode: mode}, errors.New("usage error: --allow-domain and --allow-host need a confined mode (danger-full-access allows the whole network)"))
	}
	policy, err := modes.Derive(modes.Options{
		Mode: mode, Workspace: o.Workspace, AllowWrite: o.AllowWrite,
		// dsh-sandbox's own directories stay read-only wherever XDG puts them.
		Protect:   append(slices.Clip(o.Protect), o.files.Dirs()...),
		Unprotect: o.Unprotect, DenyRead: o.DenyRead, AllowRead: o.AllowRead,
		Network: o.Network, Allowlist: allowlist, TempDir: lookupEnv(env, "TMPDIR"),
		AllowBroadWorkspace: o.AllowBroadWorkspace,
		NoCaches:            o.NoCaches,
		CacheDir:            o.CacheDir,
		CacheHome:           lookupEnv(env, "HOME"),
		Limits:              &o.Limits,
		// The caller's home and the command's, besides Derive's own.
		Homes: []string{lookupEnv(environ, "HOME"), lookupEnv(env, "HOME")},
	})
	if err != nil {
		var be *modes.BroadWorkspaceError
		if errors.As(err, &be) {
			if be.Overridable() {
				err = fmt.Errorf("%w (--allow-broad-workspace overrides)", err)
			} else {
				err = fmt.Errorf("%w (point TMPDIR at a dedicated directory, or --unsetenv TMPDIR)", err)
			}
		}
		return failReport(modes.Policy{Mode: mode, Network: o.Network}, err)
	}

	var tx *transaction.Tx
	started := false
	if o.transaction != "" {
		if !mode.Confines() {
			return failReport(policy, fmt.Errorf("usage error: --transaction needs a confined mode (%s writes to the workspace directly)", mode))
		}
		var unmake func()
		if tx, unmake, err = openTransaction(o.transaction, policy.Workspace); err != nil {
			return failReport(policy, err)
		}
		if unmake != nil {
			// A transaction made for a command that never ran is removed
			// again: nothing half-made is left.
			defer func() {
				if !started {
					unmake()
				}
			}()
		}
	}

	run, err := attach()
	if err != nil {
		return failReport(policy, err)
	}
	var records *auditRecords
	if tx == nil {
		records = openAuditRecords(policy, getenv)
	}
	cmd := &sandbox.Cmd{Policy: policy, Args: o.args, Env: env, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, LandlockABI: o.landlockABI,
		Transaction: tx, AuditCache: records.auditCache()}
	begun := time.Now()
	if err := run.start(cmd, o.timeout()); err != nil {
		rep.write(stderr, newReport(policy, nil, err))
		fail("%v", err)
		return exitCodeOf(err)
	}
	started = true
	res, to, err := run.wait()
	if err != nil {
		return failReport(policy, err)
	}
	took := time.Since(begun).Milliseconds()
	records.save(policy)
	if to {
		fmt.Fprintf(stderr, "%s: timed out after %d ms\n", name, o.timeoutMs)
	}
	if !o.quiet {
		printDenials(stderr, res, policy.Mode, o.report != "")
	}
	r := newReport(policy, res, nil)
	r.TimedOut, r.DurationMs = to, &took
	if tx != nil {
		r.Transaction = tx.Dir()
	}
	rep.write(stderr, r)
	return res.ExitCode
}

// stopper passes termination signals (so the command's TERM traps run)
// and a terminal's resize (SIGWINCH) to the command, sends it SIGTERM when
// the timeout (if any) expires, and kills the whole tree if it has not
// ended killGrace after the first termination. It returns when done
// closes, reporting whether the timeout fired.
func stopper(cmd *sandbox.Cmd, sigs <-chan os.Signal, timeout time.Duration, done <-chan struct{}) (timedOut bool) {
	var expired, deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	term := func(sig os.Signal) {
		cmd.Signal(sig)
		if deadline == nil {
			deadline = time.After(killGrace)
		}
	}
	for {
		select {
		case <-done:
			return timedOut
		case s := <-sigs:
			if s == sigResize {
				cmd.Signal(s) // a resize: passed on, nothing to end
				continue
			}
			term(s)
		case <-expired:
			expired, timedOut = nil, true
			term(syscall.SIGTERM)
		case <-deadline:
			cmd.Kill()
			deadline = nil
		}
	}
}

// printDenials prints one line per distinct denial, at most maxDenialLines,
// then one line for the rest.
func printDenials(w io.Writer, res *sandbox.Result, m modes.Mode, haveReport bool) {
	for i, d := range res.Denials {
		if i == maxDenialLines {
			break
		}
		fmt.Fprintf(w, "%s: %s\n", name, d.Line(m))
	}
	more := max(len(res.Denials)-maxDenialLines, 0)
	if more == 0 && res.DenialsDropped == 0 {
		return
	}
	where := "see --report"
	if !haveReport {
		where = "--report lists them"
	}
	switch {
	case res.DenialsDropped == 0:
		fmt.Fprintf(w, "%s: ... and %d more denials (%s)\n", name, more, where)
	default:
		fmt.Fprintf(w, "%s: ... and %d more denials (%s), and %d more denied calls not recorded (over %d distinct denials)\n",
			name, more, where, res.DenialsDropped, sandbox.MaxDenials)
	}
}

func versionLine() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return fmt.Sprintf("%s %s (report format %d, %s)", name, v, reportVersion, runtime.Version())
}

func probe(o options, stdout, stderr io.Writer) int {
	ws := o.Workspace
	if ws == "" {
		if wd, err := os.Getwd(); err == nil {
			ws = wd
		} else {
			ws = "/"
		}
	}
	r := sandbox.ProbeWith(sandbox.ProbeOptions{Workspace: ws, LandlockABI: o.landlockABI})
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
