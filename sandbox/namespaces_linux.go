package sandbox

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/proc"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/runner"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// NamespaceCache keeps, for the next commands, the namespaces that commands
// of one policy share (Cmd.Namespaces). For each policy (the whole of it:
// workspace, mode, network, writable roots, secrets; and the transaction) a
// session runner makes the user namespace, and in it the UTS namespace and
// (without network) the net namespace, once; each command's runner is then
// forked in them and makes the command's own mount, IPC and pid namespaces,
// mount view, Landlock domain and seccomp filter as a runner spawned alone
// does. A command so pays neither the runner's execve nor those namespaces'
// setup and teardown.
//
// Commands that share a net namespace share its loopback, as processes on
// one host do: a server one of them runs is reachable from the next. Only
// commands of the same policy share one, so that none can ask another's
// server to do what its own policy refuses; a command under a network
// allowlist (its egress listeners live in its net namespace) never does.
// Where the session runner cannot make its user namespace (a host that
// refuses them, ids it cannot map) or cannot fork, the command gets a runner
// of its own, as without a cache.
//
// The zero value is ready to use, by many commands at once. Close ends the
// session runners; a process that exits without it leaves none behind (each
// ends with its socket).
type NamespaceCache struct {
	mu       sync.Mutex
	sessions map[sessionKey]*session
	uses     uint64 // sessionFor's calls, the sessions' clock
	closed   bool
}

// maxSessions bounds the session runners a cache keeps: past it, the one
// used least recently is ended for a new policy's (its commands run on).
const maxSessions = 8

// sessionKey is what the commands of one session share: the runner, and
// the whole policy (its workspace, mode, network, writable roots, secrets)
// and transaction, so that no command can ask a server of another
// command's session to do what its own policy refuses.
type sessionKey struct {
	runner string
	netns  bool              // the session makes a net namespace (the network is off)
	policy [sha256.Size]byte // of the policy's JSON and the transaction's directory
}

// sessionKeyOf is the session key of a command run by runner under p in
// the transaction txDir ("": none).
func sessionKeyOf(runner string, p modes.Policy, txDir string) (sessionKey, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return sessionKey{}, err
	}
	return sessionKey{runner: runner, netns: !p.Network, policy: sha256.Sum256(append(append(b, 0), txDir...))}, nil
}

// session is one session runner.
type session struct {
	mu   sync.Mutex // one request at a time
	proc *exec.Cmd
	sock *os.File
	// maxRequest is the largest request its socket takes.
	maxRequest int
	// dead: it serves no more (it ended, or broke the protocol); a new
	// one is started for the key's next command.
	dead atomic.Bool
	// refused: the host refuses what it needs (its namespaces, its
	// fork): none is started for the key again, each command gets a
	// runner of its own.
	refused atomic.Bool
	exited  chan struct{} // closed once the session runner was reaped (nil: never started)
	used    uint64        // the cache's clock when it was last asked for (under its mu)
}

// Close ends every session runner and waits for them. Commands started
// through the cache are not affected (their runners are the caller's
// children); later commands get runners of their own.
func (nc *NamespaceCache) Close() error {
	nc.mu.Lock()
	nc.closed = true
	all := nc.sessions
	nc.sessions = nil
	nc.mu.Unlock()
	for _, s := range all {
		s.close()
	}
	return nil
}

// sessionFor returns the session runner for key, started if need be, or
// nil when none can serve (the cache is closed, or the host refuses).
func (nc *NamespaceCache) sessionFor(key sessionKey) *session {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	if nc.closed {
		return nil
	}
	nc.uses++
	if s := nc.sessions[key]; s != nil {
		s.used = nc.uses
		if s.refused.Load() {
			return nil
		}
		if !s.dead.Load() {
			return s
		}
		// (Reaped beside: a session runner found dead has exited, or
		// exits once its socket is closed.)
		go s.close()
		delete(nc.sessions, key)
	}
	if nc.sessions == nil {
		nc.sessions = map[sessionKey]*session{}
	}
	if len(nc.sessions) >= maxSessions {
		var oldest sessionKey
		for k, s := range nc.sessions {
			if o := nc.sessions[oldest]; o == nil || s.used < o.used {
				oldest = k
			}
		}
		go nc.sessions[oldest].close()
		delete(nc.sessions, oldest)
	}
	s, err := startSession(key)
	if err != nil {
		if errors.Is(err, errSessionRefused) {
			s = &session{used: nc.uses}
			s.dead.Store(true)
			s.refused.Store(true)
			nc.sessions[key] = s
		}
		return nil
	}
	s.used = nc.uses
	nc.sessions[key] = s
	return s
}

// close ends the session runner (its socket closed, it exits) and reaps it.
func (s *session) close() {
	if s.exited == nil {
		return
	}
	s.dead.Store(true)
	s.mu.Lock()
	s.sock.Close()
	s.mu.Unlock()
	<-s.exited
}

// sessionRequestMax is the largest request the session runner reads
// (SESSION_REQ_MAX in runner_session_linux.c, less its terminating NUL).
const sessionRequestMax = 2560<<10 - 1

// cmdlineRoom is the room for a forked runner's command line
// (/proc/PID/cmdline: dsh-sandbox-runner and the command, cut there).
const cmdlineRoom = 4096

// errSessionRefused: the session runner cannot serve this host.
var errSessionRefused = errors.New("session runner refused")

// errRequestTooLarge: argv and the environment exceed what the session
// runner's socket takes.
var errRequestTooLarge = errors.New("session runner: request too large")

// startSession spawns a session runner for key and waits for its
// namespaces.
func startSession(key sessionKey) (*session, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	sock := os.NewFile(uintptr(pair[0]), "dsh-sandbox-session")
	child := os.NewFile(uintptr(pair[1]), "dsh-sandbox-session")
	defer child.Close()
	proc := &exec.Cmd{
		Path: key.runner,
		// The padding is the room each forked runner writes its command
		// line into (the session runner clears it).
		Args:       []string{runner.Arg0, strings.Repeat(" ", cmdlineRoom)},
		Env:        []string{runner.EnvVar + "=" + runner.EnvSession},
		Dir:        "/",
		ExtraFiles: []*os.File{child},
		// Its own process group, as a runner's (spawnRunner).
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := proc.Start(); err != nil {
		sock.Close()
		return nil, err
	}
	s := &session{proc: proc, sock: sock, exited: make(chan struct{})}
	go func() {
		proc.Wait()
		close(s.exited)
	}()
	// A request is argv and the environment: let it be as large as the
	// host allows (the kernel caps this at twice wmem_max; a datagram
	// takes all but 32 bytes of it), and the session runner reads.
	unix.SetsockoptInt(pair[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	if b, err := unix.GetsockoptInt(pair[0], unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil {
		s.maxRequest = min(b-32, sessionRequestMax)
	}
	if err := runner.SendBytes(sock, runner.SessionTokens(key.netns), nil); err != nil {
		s.close()
		return nil, err
	}
	var m runner.Msg
	fd, err := runner.RecvMsg(sock, &m)
	if fd >= 0 {
		unix.Close(fd)
	}
	switch {
	case err != nil:
	case m.Kind == runner.MsgFail && isResourceErrno(syscall.Errno(m.Errno)):
		err = fmt.Errorf("session runner: %s", m.Detail)
	case m.Kind != runner.MsgSession || m.Layers == nil || !m.Layers.User:
		err = fmt.Errorf("%w: %s", errSessionRefused, m.Detail)
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// fork asks the session runner for a command's runner: files are its fds
// 0.., dir its working directory, cgroupDir (when not nil) the cgroup v2
// directory to start it in. It returns the runner, the caller's child, and
// whether it started in cgroupDir; an error means none was started (the
// session then serves no more when the error was its own).
func (s *session) fork(argv, env []string, files []*os.File, dir *os.File, cgroupDir *os.File) (*os.Process, bool, error) {
	fds := make([]int, 0, len(files)+2)
	for _, f := range files {
		fds = append(fds, int(f.Fd()))
	}
	fds = append(fds, int(dir.Fd()))
	if cgroupDir != nil {
		fds = append(fds, int(cgroupDir.Fd()))
	}
	mask, err := umask()
	if err != nil {
		return nil, false, err
	}
	req := runner.SessionCommand(len(files), cgroupDir != nil, mask, argv, env)
	if len(req) > s.maxRequest {
		// A runner of its own takes it (up to the kernel's ARG_MAX).
		return nil, false, errRequestTooLarge
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead.Load() {
		return nil, false, errSessionRefused
	}
	if err := runner.SendBytes(s.sock, req, unix.UnixRights(fds...)); err != nil {
		if !isResourceErrno(err) && !errors.Is(err, unix.EMSGSIZE) {
			s.dead.Store(true)
		}
		return nil, false, err
	}
	var m runner.Msg
	fd, err := runner.RecvMsg(s.sock, &m)
	if fd >= 0 {
		unix.Close(fd)
	}
	if err != nil {
		s.dead.Store(true)
		return nil, false, err
	}
	if m.Kind != runner.MsgForked || m.Pid <= 0 {
		switch e := syscall.Errno(m.Errno); {
		case m.Kind != runner.MsgFail || e == 0 || e == unix.EINVAL:
			// A broken exchange.
			s.dead.Store(true)
		case !isResourceErrno(e) && e != unix.E2BIG:
			// It cannot fork here.
			s.dead.Store(true)
			s.refused.Store(true)
		}
		return nil, false, fmt.Errorf("%w: %s", errSessionRefused, m.Detail)
	}
	// The runner is this process's child (CLONE_PARENT), not reaped
	// before Tree.reap, so its pid is its own; a pid that is not this
	// process's child is refused (the session runner is given up).
	p, err := os.FindProcess(m.Pid)
	if err != nil {
		s.dead.Store(true)
		return nil, false, err
	}
	if st, ok := proc.ReadStat(m.Pid); !ok || st.PPID != os.Getpid() {
		p.Release()
		s.dead.Store(true)
		return nil, false, fmt.Errorf("%w: pid %d is not this process's child", errSessionRefused, m.Pid)
	}
	return p, m.Cgroup == 1, nil
}

// umask is this process's umask, which a runner it spawned would inherit
// (read, not set and restored: that would race with other goroutines).
func umask() (int, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			return int(m), err
		}
	}
	return 0, errors.New("no Umask in /proc/self/status")
}
