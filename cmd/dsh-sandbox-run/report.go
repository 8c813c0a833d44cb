package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

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
