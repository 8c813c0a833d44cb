package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/runner"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// NamespaceCache keeps, for the next commands, the namespaces that commands
// of one workspace, mode and network share (Cmd.Namespaces). For each a
// session runner makes the user namespace, and in it the UTS namespace and
// (without network) the net namespace, once; each command's runner is then
// forked in them and makes the command's own mount, IPC and pid namespaces,
// mount view, Landlock domain and seccomp filter as a runner spawned alone
// does. A command so pays neither the runner's execve nor those namespaces'
// setup and teardown.
//
// Commands that share a net namespace share its loopback, as processes on
// one host do: a server one of them runs is reachable from the next. Only
// commands of the same workspace, mode and network share one; a command under a
// network allowlist (its egress listeners live in its net namespace) never
// does. Where the session runner cannot make its user namespace (a host
// that refuses them, ids it cannot map) or cannot fork, the command gets a
// runner of its own, as without a cache.
//
// The zero value is ready to use, by many commands at once. Close ends the
// session runners; a process that exits without it leaves none behind (each
// ends with its socket).
type NamespaceCache struct {
	mu       sync.Mutex
	sessions map[sessionKey]*session
	closed   bool
}

// sessionKey is what the commands of one session share: besides the
// runner, the workspace (commands that share a loopback could reach each
// other through its files anyway), the mode and the network.
type sessionKey struct {
	runner    string
	workspace string
	mode      modes.Mode
	network   bool
}

// session is one session runner.
type session struct {
	mu   sync.Mutex // one request at a time
	proc *exec.Cmd
	sock *os.File
	// dead: it serves no more (it ended, or broke the protocol); a new
	// one is started for the key's next command.
	dead bool
	// refused: the host refuses what it needs (its namespaces, its
	// fork): none is started for the key again, each command gets a
	// runner of its own.
	refused bool
	exited  chan struct{} // closed once the session runner was reaped (nil: never started)
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
	if s := nc.sessions[key]; s != nil {
		dead, refused := s.state()
		if refused {
			return nil
		}
		if !dead {
			return s
		}
		s.close()
		delete(nc.sessions, key)
	}
	if nc.sessions == nil {
		nc.sessions = map[sessionKey]*session{}
	}
	s, err := startSession(key)
	if err != nil {
		if errors.Is(err, errSessionRefused) {
			nc.sessions[key] = &session{dead: true, refused: true}
		}
		return nil
	}
	nc.sessions[key] = s
	return s
}

// state says whether the session runner serves no more, and whether the
// host refuses it.
func (s *session) state() (dead, refused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead, s.refused
}

// close ends the session runner (its socket closed, it exits) and reaps it.
func (s *session) close() {
	if s.exited == nil {
		return
	}
	s.mu.Lock()
	s.dead = true
	s.sock.Close()
	s.mu.Unlock()
	<-s.exited
}

// cmdlineRoom is the room for a forked runner's command line
// (/proc/PID/cmdline: dsh-sandbox-runner and the command, cut there).
const cmdlineRoom = 4096

// errSessionRefused: the session runner cannot serve this host.
var errSessionRefused = errors.New("session runner refused")

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
	// host allows (the kernel caps this at wmem_max).
	unix.SetsockoptInt(pair[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	if err := runner.SendBytes(sock, runner.SessionTokens(!key.network), nil); err != nil {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return nil, false, errSessionRefused
	}
	if err := runner.SendBytes(s.sock, req, unix.UnixRights(fds...)); err != nil {
		if !isResourceErrno(err) {
			s.dead = true
		}
		return nil, false, err
	}
	var m runner.Msg
	fd, err := runner.RecvMsg(s.sock, &m)
	if fd >= 0 {
		unix.Close(fd)
	}
	if err != nil {
		s.dead = true
		return nil, false, err
	}
	if m.Kind != runner.MsgForked || m.Pid <= 0 {
		switch e := syscall.Errno(m.Errno); {
		case m.Kind != runner.MsgFail || e == 0 || e == unix.EINVAL:
			// A broken exchange.
			s.dead = true
		case !isResourceErrno(e) && e != unix.E2BIG:
			// It cannot fork here.
			s.dead, s.refused = true, true
		}
		return nil, false, fmt.Errorf("%w: %s", errSessionRefused, m.Detail)
	}
	// The runner is this process's child (CLONE_PARENT), not reaped
	// before Tree.reap: its pid is its own.
	p, err := os.FindProcess(m.Pid)
	if err != nil {
		return nil, false, err
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
