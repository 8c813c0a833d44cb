//go:build linux

package main

/*
#include <signal.h>
#include <string.h>
#include <sys/resource.h>

// ll_reraise ends this process by sig, with the default action, as the
// command's own death would have ended upstream's exec'd launcher: no core
// file of the launcher (RLIMIT_CORE 0), the Go runtime's handler replaced,
// the signal unblocked on the calling thread, then raised on it. It
// returns only when the default action of sig does not end the process.
static void ll_reraise(int sig) {
	struct rlimit none = {0, 0};
	setrlimit(RLIMIT_CORE, &none);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
}

// ll_strerror is glibc's text for errnum (a static string for known
// values).
static const char *ll_strerror(int errnum) { return strerror(errnum); }
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/landlock"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// strerror is glibc's message for an errno ("No such file or directory"),
// which upstream's messages carry; Go's own are lower-case.
func strerror(e syscall.Errno) string { return C.GoString(C.ll_strerror(C.int(e))) }

// errnoOf is the errno an error wraps, or EIO.
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

// landlockRun is main for argv[0] "landlock-run". Every launcher failure
// prints exactly one line "landlock-run: ..." and exits 125 with nothing
// run; otherwise the command's status passes through, a signal death by
// the same signal. None of dsh-sandbox-run's own lines (denials, warnings)
// are printed: an upstream consumer reads any launcher line as a runner
// failure.
func landlockRun(argv, environ []string, stdout, stderr io.Writer) int {
	fail := failer(stderr, llName, llExit)
	a, err := parseLandlockRun(argv)
	if err != nil {
		return fail("%v", err)
	}
	abiCap, err := llABICap(lookupEnv(environ, llEnvABI))
	if err != nil {
		return fail("%v", err)
	}
	cwd, err := os.Getwd()
	if err == nil {
		cwd, err = filepath.EvalSymlinks(cwd)
	}
	switch {
	case err != nil && a.probe:
		cwd = "/" // the probe's commands run `true`: any directory does
	case err != nil:
		return fail("cannot get the working directory: %s", strerror(errnoOf(err)))
	}
	if a.probe {
		r := sandbox.ProbeWith(sandbox.ProbeOptions{Workspace: cwd, LandlockABI: abiCap})
		if !r.Confined {
			return fail("%s", llMsgNotEnforced)
		}
		fmt.Fprintln(stdout, llProbeLine(r.Landlock.ABI))
		return 0
	}

	rep, err := openReport(lookupEnv(environ, llEnvReport))
	if err != nil {
		return fail("cannot write report: %v", err)
	}
	defer rep.close()
	// Every failure is also written to the report, with landlock-run's
	// status (125, also for an exec failure).
	failReport := func(p modes.Policy, err error, format string, a ...any) int {
		r := newReport(p, nil, err)
		r.ExitCode = llExit
		rep.write(io.Discard, r)
		return fail(format, a...)
	}
	network, err := llNetwork(lookupEnv(environ, llEnvNetwork))
	if err != nil {
		return failReport(modes.Policy{}, err, "%v", err)
	}

	// Whether this host can confine at all, and whether upstream would
	// call it partial. Without Landlock the mount view and seccomp may
	// still confine: find out before saying so (one line, never two).
	abi, err := landlock.ABI()
	switch {
	case err != nil:
		abi = 0
		if !sandbox.ProbeWith(sandbox.ProbeOptions{Workspace: cwd}).Confined {
			return failReport(modes.Policy{}, err, "%s", llMsgNotEnforced)
		}
	case abiCap > 0 && abiCap < abi:
		abi = abiCap
	}

	// Every grant is opened as upstream opens its rule paths (O_PATH), in
	// argv order; what was opened is what is granted.
	resolved := make([]llResolved, 0, len(a.grants))
	for _, g := range a.grants {
		r, err := llOpenGrant(g)
		if err != nil {
			return failReport(modes.Policy{}, err, "cannot open rule path: %s: %s", g.arg, strerror(errnoOf(err)))
		}
		resolved = append(resolved, r)
	}
	tmpDir := lookupEnv(environ, "TMPDIR")
	if tmpDir != "" {
		if c, err := filepath.EvalSymlinks(tmpDir); err == nil {
			tmpDir = c
		}
	}
	opts, err := llOptions(resolved, cwd, tmpDir)
	if err != nil {
		return failReport(modes.Policy{}, err, "%v", err)
	}
	opts.Network = network
	opts.TempDir = lookupEnv(environ, "TMPDIR")
	opts.Homes = []string{lookupEnv(environ, "HOME")}
	policy, err := modes.Derive(opts)
	if err != nil {
		return failReport(modes.Policy{Mode: opts.Mode, Network: network}, err, "sandbox setup failed: %v", err)
	}

	run, err := attach()
	if err != nil {
		return failReport(policy, err, "sandbox setup failed: %v", err)
	}

	// Upstream says so right before it execs: before any output of the
	// command's.
	if abi < llFullABI {
		fmt.Fprintf(stderr, "%s: %s\n", llName, llMsgPartial)
	}
	// The environment passes through unchanged, as upstream's exec does.
	cmd := &sandbox.Cmd{Policy: policy, Args: a.argv, Env: environ, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, LandlockABI: abiCap}
	if err := run.start(cmd, 0); err != nil {
		var ee *sandbox.ExecError
		if errors.As(err, &ee) {
			return failReport(policy, err, "exec failed: %s", strerror(ee.Err))
		}
		return failReport(policy, err, "sandbox setup failed: %v", err)
	}
	res, _, err := run.wait()
	if err != nil {
		return failReport(policy, err, "sandbox error: %v", err)
	}
	// A report that cannot be written is not said: any launcher line
	// after a run would read as a runner failure upstream.
	rep.write(io.Discard, newReport(policy, res, nil))
	if res.Signal != 0 {
		signal.Reset()
		rep.close()
		C.ll_reraise(C.int(res.Signal))
	}
	return res.ExitCode
}

// llOpenGrant opens a grant's path with O_PATH, as upstream does, and says
// what it opened.
func llOpenGrant(g llGrant) (llResolved, error) {
	fd, err := unix.Open(g.arg, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return llResolved{}, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return llResolved{}, err
	}
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return llResolved{}, err
	}
	return llResolved{llGrant: g, path: p, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR}, nil
}
