package main

import (
	"fmt"
	"io"
	"os"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
)

// reportFile is the --report file, opened before the command starts; a nil
// *reportFile (no --report) writes nothing.
type reportFile struct {
	path string
	f    *os.File
	st   os.FileInfo // what f was when opened
}

// openReport opens (creating or truncating) the report file, or returns
// nil when path is "". The path is resolved now, before the command runs,
// as the caller gave it (so /dev/stdout works); later writes never resolve
// it again.
func openReport(path string) (*reportFile, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
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

// write replaces the report's contents with r through the descriptor. It
// says on w when that fails, and when the path no longer names the file
// (the command replaced it): the report is then not where the caller will
// look, and what is there was not written by us.
func (rf *reportFile) write(w io.Writer, r sandbox.Report) {
	if rf == nil {
		return
	}
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
