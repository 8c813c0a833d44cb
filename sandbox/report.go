package sandbox

import (
	"encoding/json"
	"errors"
	"os"
	"syscall"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// ReportVersion is the version of the Report JSON format.
const ReportVersion = 1

// Report is the JSON document dsh-sandbox-run --report writes. Its format is
// documented in the README and kept stable.
type Report struct {
	Version int        `json:"version"`
	Mode    modes.Mode `json:"mode"`
	Network bool       `json:"network"`
	// Allowlist is the network allowlist (the network being off
	// otherwise), when the policy has one.
	Allowlist   *modes.Allowlist `json:"allowlist,omitempty"`
	Workspace   string           `json:"workspace"`
	Enforcement *Enforcement     `json:"enforcement,omitempty"`
	Denials     []Denial         `json:"denials"`
	// DenialsDropped counts the denied calls left out of Denials once
	// MaxDenials distinct ones were kept.
	DenialsDropped int `json:"denials_dropped"`
	// Changes are the paths in the writable roots the command changed
	// (confined modes; see Change), ChangesDropped those left out.
	Changes        []Change `json:"changes"`
	ChangesDropped int      `json:"changes_dropped"`
	// Transaction is the directory of the transaction the command ran in
	// (then Changes are the transaction's so far), when it ran in one.
	Transaction string `json:"transaction,omitempty"`
	ExitCode    int    `json:"exit_code"`
	Signal      string `json:"signal,omitempty"`
	// TimedOut: dsh-sandbox-run's --timeout fired while the command ran
	// (it was then terminated; it may still have exited 0).
	TimedOut bool `json:"timed_out"`
	// Usage is what the command used, where measured (a cgroup of its own).
	Usage *Usage `json:"usage,omitempty"`
	Error string `json:"error,omitempty"`
}

// NewReport builds the report of a run: from its result, or from the error
// that prevented it (then the exit code is ExitCodeOf(err)).
func NewReport(p modes.Policy, res *Result, err error) Report {
	r := Report{Version: ReportVersion, Mode: p.Mode, Network: p.Network, Allowlist: p.Allowlist, Workspace: p.Workspace, Denials: []Denial{}, Changes: []Change{}}
	if err != nil {
		r.ExitCode = ExitCodeOf(err)
		r.Error = err.Error()
		var se *SetupError
		if errors.As(err, &se) {
			r.Error = se.Detail
		}
		return r
	}
	enf := res.Enforcement
	r.Enforcement = &enf
	if res.Denials != nil {
		r.Denials = res.Denials
	}
	r.DenialsDropped = res.DenialsDropped
	if res.Changes != nil {
		r.Changes = res.Changes
	}
	r.ChangesDropped = res.ChangesDropped
	r.Usage = res.Usage
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
