package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dsh-sandbox/dsh-sandbox/internal/signame"
	"github.com/dsh-sandbox/dsh-sandbox/policyfile"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// reportVersion is the version of the Report JSON format. Version 2 nests
// what the sandbox saw under "sandbox" (the Facts of a RunResult) and names
// every key in camelCase.
const reportVersion = 2

// Report is the JSON document --report writes
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
	// Argv is the command as given after "--", Cwd the directory it ran
	// in (the caller's).
	Argv []string `json:"argv,omitempty"`
	Cwd  string   `json:"cwd,omitempty"`
	// Presets are what the toolchain presets resolved to.
	Presets []policyfile.Preset `json:"presets,omitempty"`
	// DurationMs is the command's wall time, from its start to the end of
	// its process tree, when it ran.
	DurationMs *int64 `json:"durationMs,omitempty"`
	ExitCode   int    `json:"exitCode"`
	Signal     string `json:"signal,omitempty"`
	// TimedOut: dsh-sandbox-run's --timeout fired while the command ran
	// (it was then terminated; it may still have exited 0).
	TimedOut bool `json:"timedOut"`
	// Error says why the command never ran (then Sandbox is nil).
	Error string `json:"error,omitempty"`
	// Sandbox is what the sandbox saw of the command, nil when it never
	// ran.
	Sandbox *sandbox.Facts `json:"sandbox,omitempty"`
}

// newReport builds the report of a run: from its result, or from the error
// that prevented it (then the exit code is exitCodeOf(err)).
func newReport(p modes.Policy, res *sandbox.Result, err error) Report {
	r := Report{Version: reportVersion, Network: p.Network, Allowlist: p.Allowlist, Workspace: p.Workspace}
	if err != nil {
		r.ExitCode = exitCodeOf(err)
		r.Error = err.Error()
		var se *sandbox.SetupError
		if errors.As(err, &se) {
			r.Error = se.Detail
		}
		return r
	}
	f := res.Facts
	r.Sandbox = &f
	r.ExitCode = res.ExitCode
	if res.Signal != 0 {
		r.Signal = signame.Name(res.Signal)
	}
	return r
}

// exitCodeOf is the exit status dsh-sandbox-run gives for an error that
// prevented a command from running: 127 when the command was not found, 126
// when it could not be executed otherwise (*ExecError, like a shell), 125 for
// everything else (the sandbox could not be set up).
func exitCodeOf(err error) int {
	var ee *sandbox.ExecError
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

// reportFile is the --report file, opened before the command starts; a nil
// *reportFile (no --report) writes nothing.
type reportFile struct {
	path string
	f    *os.File
	st   os.FileInfo // what f was when opened
	// argv, cwd and presets describe the command in every report written.
	argv    []string
	cwd     string
	presets []policyfile.Preset
}

// openReport opens (creating or truncating) the report file, or returns
// nil when path is "". It is opened now, before the command runs; later
// writes never resolve the path again. A symlink as the last component is
// refused — an earlier sandboxed command may have planted it at a report
// path that is reused — unless it lies directly in /dev or under /proc
// (/dev/stdout, /dev/fd/3), which no confined command can write. A FIFO
// without a reader fails at once instead of blocking.
func openReport(path string) (*reportFile, error) {
	if path == "" {
		return nil, nil
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC | oNoctty | oNonblock
	if !systemLink(path) {
		flags |= oNofollow
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symlink (refused: give the file it points to)", path)
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &reportFile{path: path, f: f, st: st}, nil
}

// systemLink reports whether path names an entry directly in /dev or under
// /proc, where the symlinks are the system's.
func systemLink(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	dir := filepath.Dir(abs)
	return dir == "/dev" || dir == "/dev/fd" || dir == "/proc" || strings.HasPrefix(dir, "/proc/")
}

// write replaces the report's contents with r through the descriptor. It
// says on w when that fails, and when the path no longer names the file
// (the command replaced it): the report is then not where the caller will
// look, and what is there was not written by us.
func (rf *reportFile) write(w io.Writer, r Report) {
	if rf == nil {
		return
	}
	r.Argv, r.Cwd, r.Presets = rf.argv, rf.cwd, rf.presets
	if err := r.Overwrite(rf.f); err != nil {
		fmt.Fprintf(w, "%s: cannot write report: %v\n", name, err)
		return
	}
	if !rf.st.Mode().IsRegular() {
		return
	}
	if now, err := os.Stat(rf.path); err != nil || !os.SameFile(now, rf.st) {
		fmt.Fprintf(w, "%s: warning: --report %s was replaced while the command ran; the report went to the original file, not to what that name is now\n", name, rf.path)
	}
}

func (rf *reportFile) close() {
	if rf != nil {
		rf.f.Close()
	}
}
