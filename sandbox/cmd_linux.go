//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// SetupError reports that the sandbox could not be set up: the command never
// ran. Detail is one line saying why.
type SetupError struct {
	Detail string
}

func (e *SetupError) Error() string { return e.Detail }

// Result is how a sandboxed command ended and what the sandbox saw.
type Result struct {
	// ExitCode is the command's exit status, or 128+N when it died of signal N.
	ExitCode int
	// Signal is the signal that killed the command, or 0.
	Signal syscall.Signal
	// Denials are the facts the supervisor recorded, in first-seen order.
	Denials []Denial
	// Enforcement is how the command was confined.
	Enforcement Enforcement
}

// Cmd is a command to run under a sandbox policy. Fill the fields, then call
// Start and Wait (or Run), like os/exec.
type Cmd struct {
	Policy modes.Policy
	// Args is the command's argv; Args[0] is looked up in the PATH of Env.
	Args []string
	// Env is the command's environment; nil means os.Environ().
	Env []string
	// Dir is the working directory; "" means the current directory.
	Dir string
	// Stdin, Stdout and Stderr are given to the command as fds 0, 1 and 2;
	// nil means /dev/null.
	Stdin, Stdout, Stderr *os.File
	// Runner is the binary re-executed as the runner: it must call Init
	// first thing in main(). "" means this executable.
	Runner string

	proc     *exec.Cmd
	ns       namespaces
	prep     *preparation
	ctrl     *os.File
	facts    *factLog
	notifier *notifier
	enf      Enforcement
	done     chan struct{}
	exit     *runnerMsg
	lost     error
	waitOnce sync.Once
	result   *Result
	waitErr  error
}

// Run starts c and waits for it.
func (c *Cmd) Run() (*Result, error) {
	if err := c.Start(); err != nil {
		return nil, err
	}
	return c.Wait()
}

// Start sets up the sandbox and starts the command. It returns once the
// command runs confined, or with a *SetupError when the sandbox could not be
// set up (the command then never ran).
func (c *Cmd) Start() error {
	if c.proc != nil {
		return errors.New("sandbox: already started")
	}
	if len(c.Args) == 0 || c.Args[0] == "" {
		return &SetupError{Detail: "no command given"}
	}
	if !c.Policy.Mode.Valid() {
		return &SetupError{Detail: fmt.Sprintf("invalid mode %d", int(c.Policy.Mode))}
	}
	runnerPath := c.Runner
	if runnerPath == "" {
		exe, err := os.Executable()
		if err != nil {
			return &SetupError{Detail: fmt.Sprintf("cannot find the runner binary: %v", err)}
		}
		runnerPath = exe
	}
	prep, err := prepare(c.Policy)
	if err != nil {
		return &SetupError{Detail: err.Error()}
	}
	defer prep.close()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return &SetupError{Detail: fmt.Sprintf("control socket: %v", err)}
	}
	c.ctrl = os.NewFile(uintptr(pair[0]), "dsh-sandbox-control")
	child := os.NewFile(uintptr(pair[1]), "dsh-sandbox-control")
	defer child.Close()

	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	env = append(envWithout(env, runnerEnv), runnerEnv+"=1")
	extra := []*os.File{child}
	if prep.ruleset != nil {
		extra = append(extra, prep.ruleset)
	}
	spawn := func(ns namespaces) (*exec.Cmd, error) {
		p := &exec.Cmd{
			Path:        runnerPath,
			Args:        append([]string{runnerArg0}, c.Args...),
			Env:         env,
			Dir:         c.Dir,
			Stdin:       c.Stdin,
			Stdout:      c.Stdout,
			Stderr:      c.Stderr,
			ExtraFiles:  extra,
			SysProcAttr: namespaceAttr(ns),
		}
		return p, p.Start()
	}
	var ns namespaces
	if c.Policy.Mode.Confines() {
		ns = namespaces{User: true, Mount: true, PID: true, Net: !c.Policy.Network, IPC: true, UTS: true}
	}
	proc, err := spawn(ns)
	if err != nil && ns.User {
		// User namespaces are blocked (AppArmor, container seccomp,
		// max_user_namespaces=0): Landlock + seccomp alone must do.
		ns = namespaces{Error: userNSError(err)}
		proc, err = spawn(ns)
	}
	if err != nil {
		c.ctrl.Close()
		return &SetupError{Detail: fmt.Sprintf("cannot start the runner %s: %v", runnerPath, unwrapExecErr(err))}
	}
	c.proc = proc
	c.ns = ns
	c.prep = prep
	c.facts = newFactLog()
	c.done = make(chan struct{})

	if c.Policy.Mode.Confines() && !ns.Mount && prep.ruleset == nil {
		return c.abort(fmt.Sprintf("no filesystem confinement is possible on this host (%s)", joinNonEmpty("; ", ns.Error, prep.landlockErr)))
	}
	spec, err := prep.spec(ns)
	if err != nil {
		return c.abort(err.Error())
	}
	if err := sendBytes(c.ctrl, spec); err != nil {
		return c.abort(fmt.Sprintf("control socket: %v", err))
	}
	if c.Policy.Mode.Confines() {
		if err := sendBytes(c.ctrl, prep.bpf); err != nil {
			return c.abort(fmt.Sprintf("control socket: %v", err))
		}
	}
	// Wait until the command runs, or the runner says why it cannot.
	for {
		var m runnerMsg
		fd, err := recvMsg(c.ctrl, &m)
		if err != nil {
			return c.abort(c.runnerGone(err))
		}
		switch m.Kind {
		case msgListener:
			if fd < 0 {
				return c.abort("runner sent no seccomp listener")
			}
			n, err := newNotifier(fd, c.Policy, c.facts)
			if err != nil {
				return c.abort(err.Error())
			}
			c.notifier = n
			go n.run()
		case msgFail:
			return c.abort(m.Detail)
		case msgReady:
			c.enf = c.assess(m)
			go c.monitor()
			return nil
		default:
			if fd >= 0 {
				unix.Close(fd)
			}
			return c.abort(fmt.Sprintf("unexpected runner message %q", m.Kind))
		}
	}
}

// abort ends a failed setup: the runner is killed and reaped, and the error
// is returned as a *SetupError.
func (c *Cmd) abort(detail string) error {
	c.proc.Process.Kill()
	c.proc.Wait()
	c.ctrl.Close()
	if c.notifier != nil {
		c.notifier.wait()
	}
	close(c.done)
	return &SetupError{Detail: detail}
}

func (c *Cmd) runnerGone(err error) string {
	if errors.Is(err, errClosed) {
		c.proc.Wait()
		return fmt.Sprintf("the sandbox runner exited before the command started (%v)", c.proc.ProcessState)
	}
	return fmt.Sprintf("control socket: %v", err)
}

// monitor collects the runner's exit message and reaps it.
func (c *Cmd) monitor() {
	defer close(c.done)
	for {
		var m runnerMsg
		fd, err := recvMsg(c.ctrl, &m)
		if fd >= 0 {
			unix.Close(fd)
		}
		if err != nil {
			break
		}
		if m.Kind == msgExit {
			c.exit = &m
			break
		}
		if m.Kind == msgFail {
			c.lost = &SetupError{Detail: m.Detail}
		}
	}
	c.proc.Wait()
	c.ctrl.Close()
	if c.notifier != nil {
		c.notifier.wait()
	}
}

// Wait waits for the command and everything it started to end, and returns
// its Result. A runner that died without reporting the command's status
// (e.g. it was SIGKILLed) gives a Result with ExitCode 137 and Signal SIGKILL
// when it was killed through Kill, and an error otherwise.
func (c *Cmd) Wait() (*Result, error) {
	if c.proc == nil || c.done == nil {
		return nil, errors.New("sandbox: not started")
	}
	c.waitOnce.Do(func() {
		<-c.done
		r := &Result{Denials: c.facts.list(), Enforcement: c.enf}
		switch {
		case c.exit != nil:
			r.ExitCode, r.Signal = c.exit.ExitCode, syscall.Signal(c.exit.Signal)
		case c.lost != nil:
			c.waitErr = c.lost
			return
		default:
			ws, _ := c.proc.ProcessState.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				r.Signal = ws.Signal()
				r.ExitCode = 128 + int(r.Signal)
			} else {
				c.waitErr = fmt.Errorf("sandbox: the runner ended without the command's status (%v)", c.proc.ProcessState)
				return
			}
		}
		c.result = r
	})
	return c.result, c.waitErr
}

// Signal sends sig to the runner, which forwards it to the command's
// process group.
func (c *Cmd) Signal(sig os.Signal) error {
	if c.proc == nil || c.proc.Process == nil {
		return errors.New("sandbox: not started")
	}
	return c.proc.Process.Signal(sig)
}

// Kill ends the command and every process it started, at once. In a pid
// namespace killing the runner (its init) is enough; otherwise the runner is
// asked to kill its descendants first, then killed.
func (c *Cmd) Kill() error {
	if c.proc == nil || c.proc.Process == nil {
		return errors.New("sandbox: not started")
	}
	if !c.Policy.Mode.Confines() || !c.enfHas(LayerPIDNS) {
		sendMsg(c.ctrl, runnerMsg{Kind: msgKill}, -1)
		select {
		case <-c.done:
			return nil
		case <-afterGrace(killAskGrace):
		}
	}
	return c.proc.Process.Kill()
}

func (c *Cmd) enfHas(layer string) bool {
	for _, l := range c.enf.Layers {
		if l == layer {
			return true
		}
	}
	return false
}

// Pid is the runner's process id.
func (c *Cmd) Pid() int {
	if c.proc == nil || c.proc.Process == nil {
		return 0
	}
	return c.proc.Process.Pid
}

// namespaceAttr returns the runner's clone attributes. The caller's uid and
// gid map to themselves, so files and `id` look the same inside; a non-root
// runner keeps CAP_SYS_ADMIN/CAP_SETPCAP across its exec through the ambient
// set, only until it drops every capability before the command starts.
func namespaceAttr(ns namespaces) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{}
	if !ns.User {
		return attr
	}
	uid, gid := os.Geteuid(), os.Getegid()
	attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
	if ns.Net {
		attr.Cloneflags |= syscall.CLONE_NEWNET
	}
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	attr.GidMappingsEnableSetgroups = false
	if uid != 0 {
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP}
	}
	// The runner is pid 1 of its namespace: its death kills the tree.
	attr.Pdeathsig = syscall.SIGKILL
	return attr
}

const killAskGrace = 2 * time.Second

func afterGrace(d time.Duration) <-chan time.Time { return time.After(d) }

// userNSError explains why the runner could not get a user namespace.
func userNSError(err error) string {
	var why string
	switch {
	case errors.Is(err, unix.ENOSPC):
		why = "user.max_user_namespaces is 0 or exhausted"
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		why = "blocked by the host (AppArmor userns restriction, a container seccomp profile, or a sysctl)"
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		why = "not supported by this kernel"
	default:
		why = unwrapExecErr(err).Error()
	}
	return "user namespaces unavailable: " + why
}
