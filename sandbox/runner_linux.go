//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/landlock"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// Init turns the process into a sandbox runner when it was started as one,
// and returns immediately otherwise. Call it first thing in main() of any
// binary that a supervisor re-executes as its runner (dsh-sandbox-run does;
// a harness that links package sandbox can too, and then needs no helper
// binary). When it is a runner, Init never returns.
func Init() {
	if len(os.Args) == 0 || os.Args[0] != runnerArg0 || os.Getenv(runnerEnv) != "1" {
		return
	}
	os.Exit(runnerMain())
}

type runner struct {
	ctrl *os.File
	spec runnerSpec
	env  []string
}

func runnerMain() int {
	// Every restriction is applied to this thread, and the command is
	// started from it.
	runtime.LockOSThread()
	ctrl := os.NewFile(ctrlFD, "dsh-sandbox-control")
	if err := cloexecFrom(ctrlFD); err != nil {
		fmt.Fprintf(os.Stderr, "dsh-sandbox-runner: %v\n", err)
		return 125
	}
	r := &runner{ctrl: ctrl}
	if _, err := recvMsg(ctrl, &r.spec); err != nil {
		fmt.Fprintf(os.Stderr, "dsh-sandbox-runner: read spec: %v\n", err)
		return 125
	}
	r.env = envWithout(os.Environ(), runnerEnv)
	enf, err := r.confine()
	if err != nil {
		sendMsg(ctrl, runnerMsg{Kind: msgFail, Detail: err.Error()}, -1)
		return 125
	}
	if os.Getpid() != 1 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			sendMsg(ctrl, runnerMsg{Kind: msgFail, Detail: fmt.Sprintf("set child subreaper: %v", err)}, -1)
			return 125
		}
	}
	child, code := r.start()
	if err := sendMsg(ctrl, runnerMsg{Kind: msgReady, Enforcement: &enf}, -1); err != nil {
		killDescendants()
		return 125
	}
	if child < 0 {
		sendMsg(ctrl, runnerMsg{Kind: msgExit, ExitCode: code}, -1)
		return 0
	}
	return r.supervise(child)
}

// confine applies the policy to this thread in the documented order.
func (r *runner) confine() (Enforcement, error) {
	p := r.spec.Policy
	if !p.Mode.Confines() {
		return assess(p.Mode, layers{}), nil
	}
	l := layers{ns: r.spec.Namespaces}
	wd, wdErr := os.Getwd()

	// 1. Mount view.
	var fsReasons []string
	if l.ns.Mount {
		fresh, err := buildMountView(p, l.ns.PID)
		if err != nil {
			fsReasons = append(fsReasons, err.Error())
		} else {
			l.mountView, l.freshProc = true, fresh
		}
	} else if l.ns.Error != "" {
		fsReasons = append(fsReasons, "no mount view: "+l.ns.Error)
	}
	if wdErr == nil {
		// Re-enter the working directory so relative paths use the new mounts.
		if err := os.Chdir(wd); err != nil {
			return Enforcement{}, fmt.Errorf("chdir %s: %w", wd, err)
		}
	}
	abi, llErr := landlock.ABI()
	if llErr != nil {
		fsReasons = append(fsReasons, llErr.Error())
	}
	if !l.mountView && llErr != nil {
		return Enforcement{}, fmt.Errorf("no filesystem confinement is possible on this host (%s)", strings.Join(fsReasons, "; "))
	}
	if !seccomp.Supported() {
		return Enforcement{}, errors.New("seccomp filtering is not available on this host")
	}

	// 2. Capabilities. 3. no_new_privs.
	if err := dropCapabilities(); err != nil {
		return Enforcement{}, err
	}
	if eff, err := effectiveCaps(); err != nil || eff != 0 {
		return Enforcement{}, fmt.Errorf("capability self-test: CapEff=%#x err=%v", eff, err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return Enforcement{}, fmt.Errorf("set no_new_privs: %w", err)
	}

	// 4. Landlock.
	if llErr == nil {
		if err := landlock.ForABI(p, abi).Restrict(); err != nil {
			return Enforcement{}, err
		}
		// The self-test path lies in /proc; a policy whose writable roots
		// cover /proc (workspace "/") leaves nothing to deny there.
		if rootOf(p.WritableRoots, "/proc") == "" {
			if err := landlockSelfTest(); err != nil {
				return Enforcement{}, err
			}
		}
		l.landlockABI = abi
	}

	// 5. seccomp.
	notify := r.spec.Notify && seccomp.NotifySupported()
	listener, err := seccomp.Load(seccomp.Spec{Network: p.Network, Notify: notify})
	if err != nil {
		return Enforcement{}, err
	}
	if listener >= 0 {
		err := sendMsg(r.ctrl, runnerMsg{Kind: msgListener}, listener)
		unix.Close(listener)
		if err != nil {
			return Enforcement{}, fmt.Errorf("pass seccomp listener: %w", err)
		}
	}
	if err := seccompSelfTest(); err != nil {
		return Enforcement{}, err
	}
	l.seccomp, l.notify = true, notify
	enf := assess(p.Mode, l)
	enf.Reasons = fsReasons
	return enf, nil
}

// landlockSelfTest checks that the ruleset really denies: opening this
// thread's comm file for writing is allowed by DAC to its owner (root too)
// and denied by every ruleset this package builds.
func landlockSelfTest() error {
	fd, err := unix.Open("/proc/thread-self/comm", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
		return errors.New("landlock self-test: a write outside the policy was allowed")
	}
	if !errors.Is(err, unix.EACCES) {
		return fmt.Errorf("landlock self-test: expected EACCES, got %w", err)
	}
	return nil
}

// seccompSelfTest checks that the filter is loaded: io_uring_setup is denied
// with EPERM by it, and would fail with EINVAL/EFAULT otherwise.
func seccompSelfTest() error {
	_, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 0, 0, 0)
	if e != unix.EPERM {
		return fmt.Errorf("seccomp self-test: io_uring_setup gave %v, want EPERM", e)
	}
	return nil
}

// start execs the command in a new session from the restricted thread. When
// it cannot be started, it reports why on stderr and returns the shell's
// convention (127 not found, 126 not executable).
func (r *runner) start() (pid int, code int) {
	name := r.spec.Args[0]
	path, err := exec.LookPath(name)
	if err != nil && !errors.Is(err, exec.ErrDot) {
		fmt.Fprintf(os.Stderr, "dsh-sandbox-run: %s: %v\n", name, unwrapExecErr(err))
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return -1, 127
		}
		return -1, 126
	}
	pid, err = syscall.ForkExec(path, r.spec.Args, &syscall.ProcAttr{
		Env:   r.env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "dsh-sandbox-run: %s: %v\n", name, err)
		if errors.Is(err, unix.ENOENT) {
			return -1, 127
		}
		return -1, 126
	}
	return pid, 0
}

func unwrapExecErr(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// supervise stays with the command as its init: it forwards signals to the
// command's process group, reaps orphans, and ends the whole tree when the
// command's main process ends or the supervisor goes away.
func (r *runner) supervise(child int) int {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH, unix.SIGCONT)
	go func() {
		for s := range sigs {
			sig := s.(syscall.Signal)
			if unix.Kill(-child, sig) != nil {
				unix.Kill(child, sig)
			}
		}
	}()
	go func() {
		var m runnerMsg
		for {
			fd, err := recvMsg(r.ctrl, &m)
			if fd >= 0 {
				unix.Close(fd)
			}
			if err != nil {
				// The supervisor is gone: nothing may outlive it.
				if os.Getpid() != 1 {
					killDescendants()
				}
				os.Exit(1)
			}
			if m.Kind == msgKill {
				// The main loop reaps the command and kills the rest.
				unix.Kill(-child, unix.SIGKILL)
				unix.Kill(child, unix.SIGKILL)
			}
		}
	}()
	var status unix.WaitStatus
	for {
		pid, err := unix.Wait4(-1, &status, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			sendMsg(r.ctrl, runnerMsg{Kind: msgFail, Detail: fmt.Sprintf("wait: %v", err)}, -1)
			return 1
		}
		if pid == child {
			break
		}
	}
	signal.Stop(sigs)
	if os.Getpid() != 1 {
		killDescendants()
	}
	m := runnerMsg{Kind: msgExit}
	switch {
	case status.Exited():
		m.ExitCode = status.ExitStatus()
	case status.Signaled():
		m.Signal = int(status.Signal())
		m.ExitCode = 128 + m.Signal
	}
	sendMsg(r.ctrl, m, -1)
	return 0
}

func envWithout(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
