package runner

import (
	"strconv"
	"strings"
)

// The runner is this binary re-executed with argv[0] Arg0, EnvVar=1
// in its environment and the command as argv[1:]; its control socket is
// fd 3. The Landlock ruleset fd travels with the seccomp program (SCM_RIGHTS).
const (
	Arg0   = "dsh-sandbox-runner"
	EnvVar = "_DSH_SANDBOX_RUNNER"
	// EnvSession, as EnvVar's value, starts a session runner instead: it
	// makes the namespaces its commands share, then forks a runner per
	// command (SessionTokens, SessionCommand; runner_session_linux.c).
	EnvSession = "session"
)

// Namespaces says which namespaces a sandboxed command runs in.
type Namespaces struct {
	User  bool `json:"user"`
	Mount bool `json:"mount"`
	PID   bool `json:"pid"`
	Net   bool `json:"net"`
	IPC   bool `json:"ipc"`
	UTS   bool `json:"uts"`
}

// Layers is what the runner reports it applied.
type Layers struct {
	Namespaces
	NSError   string `json:"ns_error"`
	MountView bool   `json:"mount_view"`
	FreshProc bool   `json:"fresh_proc"`
	Landlock  bool   `json:"landlock"`
	Seccomp   bool   `json:"seccomp"`
	Notify    bool   `json:"notify"`
	// Nproc: the runner set RLIMIT_NPROC (spec option "nproc") for the
	// command, in a user namespace of its own.
	Nproc bool `json:"nproc"`
	// CmdPid is the command's pid in the runner's pid namespace (the
	// host's when the runner made none).
	CmdPid int `json:"cmd_pid"`
}

// SpecTokens encodes the runner's spec: NUL-separated tokens, "dsh2", then
// key/value options, then "ops" and the mount plan (see runner_main_linux.c).
// The spec comes in two parts: the first, sent when the runner is spawned,
// has only the options its namespaces need ("confine", "userns", "netns",
// "extra", "cgjoin"), which the second, the whole spec, must repeat.
//
// Every token the runner matches — Arg0, EnvVar, "dsh2", "ops", the option
// keys of package sandbox's spec (prepare_linux.go) and the mount plan's
// steps and modes (package mountplan) — is listed once, in runner_linux.h:
// a token added, renamed or removed on the Go side must change there too.
func SpecTokens(opts [][2]string, plan []string) []byte {
	var b []byte
	add := func(s string) { b = append(append(b, s...), 0) }
	add("dsh2")
	for _, kv := range opts {
		add(kv[0])
		add(kv[1])
	}
	add("ops")
	for _, s := range plan {
		add(s)
	}
	return b
}

// SessionTokens is a session runner's first message: the namespaces its
// commands share, with a net namespace when netns.
func SessionTokens(netns bool) []byte {
	n := "0"
	if netns {
		n = "1"
	}
	return tokens("dsh2", "session", n)
}

// SessionCommand asks a session runner for a command's runner: nfd files
// (its fds 0..nfd-1) travel with it, then its working directory and, with
// cgroup, the cgroup v2 directory to start it in; umask is its umask, argv
// the command's (without the runner's argv[0]) and env its environment.
func SessionCommand(nfd int, cgroup bool, umask int, argv, env []string) []byte {
	cg := "0"
	if cgroup {
		cg = "1"
	}
	head := []string{"dsh2", "command", strconv.Itoa(nfd), cg, strconv.FormatInt(int64(umask), 8), strconv.Itoa(len(argv))}
	return tokens(append(append(head, argv...), env...)...)
}

func tokens(t ...string) []byte {
	var b []byte
	for _, s := range t {
		b = append(append(b, s...), 0)
	}
	return b
}

// Message kinds sent by the runner.
const (
	MsgSession  = "session"  // a session runner made its namespaces (Layers says which)
	MsgForked   = "forked"   // a session runner forked a command's runner (Pid, Cgroup)
	MsgInit     = "init"     // the pid-namespace init's pid, seen from outside
	MsgKeeper   = "keeper"   // the inner keeper's pid (no pid namespace)
	MsgListener = "listener" // the seccomp listener's fd number in the runner, and the mount view
	MsgAck      = "ack"      // supervisor to runner: the listener was taken
	// MsgNetListen: an egress listener's fd number in the runner (in its
	// net namespace, under a network allowlist), taken like the listener.
	MsgNetListen = "netlisten"
	MsgReady     = "ready"    // the command started
	MsgFail      = "fail"     // the sandbox could not be set up; nothing ran
	MsgExecFail  = "execfail" // the sandbox was set up but the command's execve failed
	MsgExit      = "exit"     // the command ended, and every process of it is gone
	// MsgEnded: the command's main process ended (its status), and the
	// inner keeper now kills what is left by walking the tree (no pid
	// namespace); MsgExit follows with the same status.
	MsgEnded = "ended"
)

// EnvWithout is env without the variable name.
func EnvWithout(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// Msg is one control message, either way.
type Msg struct {
	Kind     string  `json:"kind"`
	Detail   string  `json:"detail,omitempty"`
	Layers   *Layers `json:"layers,omitempty"`
	ExitCode int     `json:"exit_code,omitempty"`
	Signal   int     `json:"signal,omitempty"`
	Pid      int     `json:"pid,omitempty"`
	FD       int     `json:"fd,omitempty"`
	Errno    int     `json:"errno,omitempty"`
	Op       string  `json:"op,omitempty"` // fail: what failed, with Errno
	// MountView (listener): 1 when the command has the mount view. Anything
	// else, a missing field included, means none: the notifier then refuses
	// more, never less.
	MountView int `json:"mount_view,omitempty"`
	// NetNS (listener): 1 when the command has a net namespace of its own.
	NetNS int `json:"netns,omitempty"`
	// IPCNS (listener): 1 when the command has an IPC namespace of its own.
	IPCNS int `json:"ipcns,omitempty"`
	// Caches (listener, ready): a character per toolchain cache overlay of
	// the mount plan, in its order: '1' mounted, anything else not (the
	// cache stays read-only).
	Caches string `json:"caches,omitempty"`
	// Cgroup (forked): 1 when the runner was started in the cgroup sent.
	Cgroup int `json:"cgroup,omitempty"`
}

type closedError struct{}

func (closedError) Error() string { return "control socket closed" }

// ErrClosed is RecvMsg's error once the peer closed the control socket.
var ErrClosed error = closedError{}
