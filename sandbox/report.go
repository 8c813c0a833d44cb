package sandbox

import (
	"encoding/json"
	"errors"
	"os"
	"syscall"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// ReportVersion is the version of the Report JSON format. Version 2 nests
// what the sandbox saw under "sandbox" (the Facts of a RunResult) and names
// every key in camelCase.
const ReportVersion = 2

// Report is the JSON document dsh-sandbox-run --report writes
// (docs/report.md). Its format is kept stable within a version.
type Report struct {
	Version int  `json:"version"`
	Network bool `json:"network"`
	// Allowlist is the network allowlist (the network being off
	// otherwise), when the policy has one.
	Allowlist *modes.Allowlist `json:"allowlist,omitempty"`
	Workspace string           `json:"workspace"`
	// Transaction is the directory of the transaction the command ran in
	// (then Sandbox.Changes are the transaction's so far), when it ran in
	// one.
	Transaction string `json:"transaction,omitempty"`
	ExitCode    int    `json:"exitCode"`
	Signal      string `json:"signal,omitempty"`
	// TimedOut: dsh-sandbox-run's --timeout fired while the command ran
	// (it was then terminated; it may still have exited 0).
	TimedOut bool `json:"timedOut"`
	// Error says why the command never ran (then Sandbox is nil).
	Error string `json:"error,omitempty"`
	// Sandbox is what the sandbox saw of the command, nil when it never
	// ran.
	Sandbox *Facts `json:"sandbox,omitempty"`
}

// NewReport builds the report of a run: from its result, or from the error
// that prevented it (then the exit code is ExitCodeOf(err)).
func NewReport(p modes.Policy, res *Result, err error) Report {
	r := Report{Version: ReportVersion, Network: p.Network, Allowlist: p.Allowlist, Workspace: p.Workspace}
	if err != nil {
		r.ExitCode = ExitCodeOf(err)
		r.Error = err.Error()
		var se *SetupError
		if errors.As(err, &se) {
			r.Error = se.Detail
		}
		return r
	}
	f := res.Facts
	r.Sandbox = &f
	r.ExitCode = res.ExitCode
	if res.Signal != 0 {
		r.Signal = SignalName(res.Signal)
	}
	return r
}

// ExitCodeOf is the exit status dsh-sandbox-run gives for an error that
// prevented a command from running: 127 when the command was not found, 126
// when it could not be executed otherwise (*ExecError, like a shell), 125 for
// everything else (the sandbox could not be set up).
func ExitCodeOf(err error) int {
	var ee *ExecError
	if errors.As(err, &ee) {
		if ee.Err == syscall.ENOENT {
			return 127
		}
		return 126
	}
	return 125
}

// Overwrite replaces the contents of f with the report as indented JSON:
// for a regular file it truncates f and writes at offset 0 (ftruncate and
// pwrite), otherwise (a pipe, a terminal) it writes. It never opens a path,
// so a caller that opened f before the command started writes where it
// meant to, whatever the command did to the file's name meanwhile (a
// symlink planted there cannot redirect the write).
func (r Report) Overwrite(f *os.File) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		_, err = f.Write(b)
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	return err
}

// SignalName returns the conventional name of sig, e.g. "SIGKILL".
func SignalName(sig syscall.Signal) string {
	if n := signalName(sig); n != "" {
		return n
	}
	return "SIG" + sig.String()
}
