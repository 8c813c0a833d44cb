package sandbox

import (
	"encoding/json"
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// ReportVersion is the version of the Report JSON format.
const ReportVersion = 1

// Report is the JSON document dsh-sandbox-run --report writes. Its format is
// documented in the README and kept stable.
type Report struct {
	Version     int          `json:"version"`
	Mode        modes.Mode   `json:"mode"`
	Network     bool         `json:"network"`
	Workspace   string       `json:"workspace"`
	Enforcement *Enforcement `json:"enforcement,omitempty"`
	Denials     []Denial     `json:"denials"`
	ExitCode    int          `json:"exit_code"`
	Signal      string       `json:"signal,omitempty"`
	Error       string       `json:"error,omitempty"`
}

// NewReport builds the report of a run: from its result, or from the error
// that prevented it (then the exit code is ExitCodeOf(err)).
func NewReport(p modes.Policy, res *Result, err error) Report {
	r := Report{Version: ReportVersion, Mode: p.Mode, Network: p.Network, Workspace: p.Workspace, Denials: []Denial{}}
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

// WriteFile writes the report as indented JSON.
func (r Report) WriteFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// SignalName returns the conventional name of sig, e.g. "SIGKILL".
func SignalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return "SIG" + sig.String()
}
