package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/audit"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// startWalk is the audit's start walk run beside the command's start
// instead of before it. Every change a confined command with a supervisor
// makes in its writable roots is a notified call (the filter routes every
// write-like call, a change of mode or a bind, and with the network off a
// command can reach nothing outside the sandbox that writes for it), so
// the supervisor holds the first notified call until the walk is done
// (supervisor.Config.FirstCall): the walk still sees the roots as they were
// before the command changed anything. A command that made no notified call
// changed nothing there: its walk is abandoned and no walk runs at its end.
// That is the audit's whole cost for `cat`, `grep`, `ls` or `git log`,
// whatever the size of the workspace.
type startWalk struct {
	stop   chan struct{}
	done   chan struct{}
	walk   func() ([]*audit.Audit, error)
	again  sync.Once
	audits []*audit.Audit
	err    error
}

// beginStartWalk starts the walk of c's audited roots.
func (c *Cmd) beginStartWalk() *startWalk {
	w := &startWalk{stop: make(chan struct{}), done: make(chan struct{})}
	w.walk = func() ([]*audit.Audit, error) {
		return audit.StartStoppable(c.Policy, c.AuditSkip, c.AuditCache.cache(), w.stop)
	}
	go func() {
		defer close(w.done)
		w.audits, w.err = w.walk()
	}()
	return w
}

// wait waits for the walk and returns its error. A walk that ran out of
// descriptors or memory is walked once more, now, in case the shortage
// has passed (the walk runs beside the command only with walkBesideFDs
// free); the first call is still held, so the roots are still as they
// were. (The notifier holds that call's own descriptors meanwhile, so this
// alone did not end TestExecutorResourceExhaustion's EIO.)
func (w *startWalk) wait() error {
	<-w.done
	w.again.Do(func() {
		if ResourceErrorOf("", w.err) != nil {
			w.audits, w.err = w.walk()
		}
	})
	return w.err
}

// abandon stops the walk and waits for it to end.
func (w *startWalk) abandon() {
	close(w.stop)
	<-w.done
}

// walkBesideFDs is how many more descriptors this process must be free to
// open for a start walk to run beside the command's start. With fewer, the
// walk runs before it, where running out fails the command's start with a
// *ResourceError and nothing runs; beside it, the walk and the spawn take
// descriptors at once, and the walk's failure could only fail the command's
// first write with EIO, the command started (TestExecutorResourceExhaustion
// saw that at 15 and 27 descriptors spare).
const walkBesideFDs = 64

// freeFDs is how many more descriptors this process may open (its
// RLIMIT_NOFILE less those open), or -1 when that cannot be read.
func freeFDs() int {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) != nil {
		return -1
	}
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return -1
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return -1
	}
	// (names counts f itself, which is closed again.)
	return int(min(rl.Cur, 1<<30)) - len(names) + 1
}

// walksBeside reports whether c's start walk may run beside the command's
// start: the command is confined with a supervisor, which sees each of its
// changes (see startWalk) — not with the network open or an allowlist (a
// service on the host's loopback or network, reached by a connect that
// changes no file, could write for it), not in a
// transaction (its upper layer is audited, as it was at the start), and not
// given a file open for writing that may lie in an audited root (a write to
// it is no notified call).
func (c *Cmd) walksBeside() bool {
	p := c.Policy
	roots := p.AuditedRoots()
	if !c.prep.notify || !p.Mode.Confines() || p.Network || p.Allowlist != nil || c.Transaction != nil || len(roots) == 0 {
		return false
	}
	for _, f := range append([]*os.File{c.Stdin, c.Stdout, c.Stderr}, c.ExtraFiles...) {
		if f != nil && mayWriteIn(f, roots) {
			return false
		}
	}
	return true
}

// mayWriteIn reports whether f is a regular file open for writing that is,
// or may be, a file in roots: named there, linked more than once (another
// name may be there), or of a path that cannot be told.
func mayWriteIn(f *os.File, roots []string) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	may := true
	rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		if unix.Fstat(int(fd), &st) != nil {
			return
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			may = false
			return
		}
		if fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0); err == nil && fl&unix.O_ACCMODE == unix.O_RDONLY {
			may = false
			return
		}
		if st.Nlink != 1 {
			return
		}
		// The path of the open file itself (no symlink in it); a file
		// deleted since has none.
		path, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(fd)))
		if err != nil || !filepath.IsAbs(path) || strings.HasSuffix(path, " (deleted)") {
			return
		}
		may = slices.ContainsFunc(roots, func(r string) bool { return modes.Within(path, r) })
	})
	return may
}
