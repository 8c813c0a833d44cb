package sandbox

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/runner"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// sessionPolicy derives mode's policy for workspace ws, without resource
// limits (a process limit without a cgroup keeps a command out of its
// session, see forkFromSession).
func sessionPolicy(t *testing.T, mode modes.Mode, ws string) modes.Policy {
	t.Helper()
	p, err := modes.Derive(modes.Options{Mode: mode, Workspace: ws})
	require.NoError(t, err)
	p.Limits = modes.Limits{}
	return p
}

// needSession skips where no session runner can start (no user
// namespaces), failing instead under DSH_REQUIRE_LANDLOCK (CI).
func needSession(t *testing.T) {
	t.Helper()
	s, err := startSession(sessionKey{runner: selfExe, netns: true})
	if err != nil {
		if os.Getenv("DSH_REQUIRE_LANDLOCK") != "" {
			t.Fatalf("no session runner here: %v", err)
		}
		t.Skipf("no session runner here: %v", err)
	}
	s.close()
}

// asRootAndUser runs f, and run by root runs it again in a copy of the test
// binary as the unprivileged test user ($DSH_TEST_USER, default dshtest):
// root hides what a user's session runner cannot do. A missing user fails
// the test under CI=true or when DSH_TEST_USER is set.
func asRootAndUser(t *testing.T, f func(t *testing.T)) {
	if os.Geteuid() != 0 || os.Getenv("DSH_SANDBOX_TEST_AS_USER") == "1" {
		f(t)
		return
	}
	t.Run("root", f)
	t.Run("user", func(t *testing.T) {
		name := os.Getenv("DSH_TEST_USER")
		if name == "" {
			name = "dshtest"
		}
		u, err := user.Lookup(name)
		if err != nil {
			if os.Getenv("CI") == "true" || os.Getenv("DSH_TEST_USER") != "" {
				t.Fatalf("test user %q: %v", name, err)
			}
			t.Skipf("!!! test user %q not found (%v): the unprivileged half DID NOT RUN", name, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		dir, err := os.MkdirTemp("", "sandbox-test-")
		require.NoError(t, err)
		defer os.RemoveAll(dir)
		require.NoError(t, os.Chmod(dir, 0o755))
		exe, err := os.Executable()
		require.NoError(t, err)
		in, err := os.Open(exe)
		require.NoError(t, err)
		defer in.Close()
		bin := filepath.Join(dir, "sandbox.test")
		out, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
		require.NoError(t, err)
		_, err = io.Copy(out, in)
		require.NoError(t, err)
		require.NoError(t, out.Close())
		parent := strings.TrimSuffix(t.Name(), "/user")
		cmd := exec.Command(bin, "-test.run=^"+parent+"$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "DSH_SANDBOX_TEST_AS_USER=1", "HOME="+u.HomeDir, "TMPDIR=/tmp")
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
		b, err := cmd.CombinedOutput()
		t.Logf("as %s:\n%s", name, b)
		require.NoError(t, err, "as %s", name)
		require.Contains(t, string(b), "--- PASS: "+parent, "as %s: the test did not pass", name)
	})
}

// sessionCount is how many session runners nc keeps.
func sessionCount(nc *NamespaceCache) int {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	return len(nc.sessions)
}

// runShell runs script under p through nc (nil: none) and returns its
// standard output.
func runShell(t *testing.T, nc *NamespaceCache, p modes.Policy, script string) (string, *Result) {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer out.Close()
	c := &Cmd{Policy: p, Path: "/bin/bash", Args: []string{"bash", "-c", script}, Dir: p.Workspace, Stdout: out, Stderr: out, Namespaces: nc}
	r, err := c.Run()
	require.NoError(t, err)
	b, err := os.ReadFile(out.Name())
	require.NoError(t, err)
	return string(b), r
}

// TestNamespaceCacheSharesByWorkspaceAndMode: commands of one mode and
// network share the session's user and net namespaces, each with mount and
// pid namespaces of its own; another mode or workspace, or no cache, gets
// others.
func TestNamespaceCacheSharesByWorkspaceAndMode(t *testing.T) {
	asRootAndUser(t, func(t *testing.T) {
		needSession(t)
		var nc NamespaceCache
		defer nc.Close()
		const script = "readlink /proc/self/ns/user /proc/self/ns/net /proc/self/ns/mnt /proc/self/ns/pid"
		ws := sessionPolicy(t, modes.WorkspaceWrite, t.TempDir())
		ns := func(nc *NamespaceCache, p modes.Policy) []string {
			out, r := runShell(t, nc, p, script)
			require.Equal(t, 0, r.ExitCode, out)
			f := strings.Fields(out)
			require.Len(t, f, 4, out)
			return f
		}
		// a's namespaces are alive while b's are read (a namespace's number
		// is reused once it is gone).
		in, hold, err := os.Pipe()
		require.NoError(t, err)
		defer hold.Close()
		r, w, err := os.Pipe()
		require.NoError(t, err)
		defer r.Close()
		first := &Cmd{Policy: ws, Path: "/bin/bash", Args: []string{"bash", "-c", script + "; read"}, Dir: ws.Workspace, Stdin: in, Stdout: w, Namespaces: &nc}
		require.NoError(t, first.Start())
		in.Close()
		w.Close()
		var a []string
		lines := bufio.NewScanner(r)
		for len(a) < 4 && lines.Scan() {
			a = append(a, lines.Text())
		}
		require.Len(t, a, 4)
		b := ns(&nc, ws)
		hold.Close()
		_, err = first.Wait()
		require.NoError(t, err)
		assert.Equal(t, a[:2], b[:2], "the same session: user and net namespaces")
		assert.NotEqual(t, a[2], b[2], "a mount namespace per command")
		assert.NotEqual(t, a[3], b[3], "a pid namespace per command")
		ro := ns(&nc, sessionPolicy(t, modes.ReadOnly, ws.Workspace))
		assert.NotEqual(t, a[0], ro[0], "another mode, another session")
		assert.NotEqual(t, a[1], ro[1], "another mode, another net namespace")
		other := ns(&nc, sessionPolicy(t, modes.WorkspaceWrite, t.TempDir()))
		assert.NotEqual(t, a[1], other[1], "another workspace, another net namespace")
		alone := ns(nil, ws)
		assert.NotEqual(t, a[1], alone[1], "no cache: a net namespace of its own")
		assert.Equal(t, 3, sessionCount(&nc))
	})
}

// TestNamespaceCacheLoopback: a server one command of a session runs is
// reachable from the next command of that session, and not from a command
// of another mode (its connection never arrives).
func TestNamespaceCacheLoopback(t *testing.T) {
	asRootAndUser(t, func(t *testing.T) {
		needSession(t)
		var nc NamespaceCache
		defer nc.Close()
		ws := sessionPolicy(t, modes.WorkspaceWrite, t.TempDir())
		ro := sessionPolicy(t, modes.ReadOnly, ws.Workspace)
		r, w, err := os.Pipe()
		require.NoError(t, err)
		defer r.Close()
		server := &Cmd{Policy: ws, Path: "/bin/bash", Dir: ws.Workspace, Stdout: w, Stderr: w, Namespaces: &nc, Args: []string{"bash", "-c",
			`exec python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(4); print(s.getsockname()[1], flush=True); c,_=s.accept(); print("got", c.recv(100).decode().strip(), flush=True)'`}}
		require.NoError(t, server.Start())
		w.Close()
		lines := bufio.NewScanner(r)
		require.True(t, lines.Scan(), "the server's port")
		port := strings.TrimSpace(lines.Text())
		connect := "exec 3<>/dev/tcp/127.0.0.1/" + port + " && echo from-$MODE >&3"
		out, res := runShell(t, &nc, ro, strings.ReplaceAll(connect, "$MODE", "read-only"))
		assert.NotEqual(t, 0, res.ExitCode, "read-only reached workspace-write's server: %s", out)
		out, res = runShell(t, &nc, ws, strings.ReplaceAll(connect, "$MODE", "workspace-write"))
		assert.Equal(t, 0, res.ExitCode, out)
		require.True(t, lines.Scan(), "the server's report")
		assert.Equal(t, "got from-workspace-write", lines.Text(), "the first connection is the same session's")
		sr, err := server.Wait()
		require.NoError(t, err)
		assert.Equal(t, 0, sr.ExitCode)
	})
}

// TestNamespaceCacheCommandGetsOnlyItsFiles: a command forked by a session
// runner holds the same descriptors as one whose runner was spawned alone
// (never the session's socket).
func TestNamespaceCacheCommandGetsOnlyItsFiles(t *testing.T) {
	asRootAndUser(t, func(t *testing.T) {
		needSession(t)
		var nc NamespaceCache
		defer nc.Close()
		p := sessionPolicy(t, modes.WorkspaceWrite, t.TempDir())
		const script = "ls /proc/self/fd; readlink /proc/self/fd/0"
		alone, _ := runShell(t, nil, p, script)
		forked, _ := runShell(t, &nc, p, script)
		assert.Equal(t, alone, forked)
		assert.Equal(t, "0\n1\n2\n3\n/dev/null\n", forked)
		// The runner's own process (the relay) holds the same descriptors
		// too: nothing of the session runner's. (It is sealed, not
		// dumpable: only root reads them.)
		if os.Geteuid() != 0 {
			return
		}
		relayFDs := func(nc *NamespaceCache) []string {
			in, hold, err := os.Pipe()
			require.NoError(t, err)
			defer hold.Close()
			c := &Cmd{Policy: p, Path: "/bin/bash", Args: []string{"bash", "-c", "read"}, Dir: p.Workspace, Stdin: in, Namespaces: nc}
			require.NoError(t, c.Start())
			in.Close()
			ents, err := os.ReadDir("/proc/" + strconv.Itoa(c.Pid()) + "/fd")
			require.NoError(t, err)
			var fds []string
			for _, e := range ents {
				target, _ := os.Readlink("/proc/" + strconv.Itoa(c.Pid()) + "/fd/" + e.Name())
				fds = append(fds, e.Name()+" "+strings.SplitN(target, ":", 2)[0])
			}
			hold.Close()
			_, err = c.Wait()
			require.NoError(t, err)
			return fds
		}
		// A runner spawned alone also inherits what this process leaves
		// open across execve (the test harness's descriptors, say).
		inherited := map[string]bool{}
		ents, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		for _, e := range ents {
			fd, _ := strconv.Atoi(e.Name())
			if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 && fd > 2 {
				inherited[e.Name()] = true
			}
		}
		var alone2 []string
		for _, fd := range relayFDs(nil) {
			if !inherited[strings.Fields(fd)[0]] {
				alone2 = append(alone2, fd)
			}
		}
		assert.Equal(t, alone2, relayFDs(&nc))
		assert.Equal(t, 1, sessionCount(&nc))
	})
}

// TestNamespaceCacheOutlivesItsRunner: a session runner that is gone
// (killed) is replaced for the next command, which runs.
func TestNamespaceCacheOutlivesItsRunner(t *testing.T) {
	asRootAndUser(t, func(t *testing.T) {
		needSession(t)
		var nc NamespaceCache
		defer nc.Close()
		p := sessionPolicy(t, modes.WorkspaceWrite, t.TempDir())
		out, r := runShell(t, &nc, p, "readlink /proc/self/ns/net")
		require.Equal(t, 0, r.ExitCode, out)
		nc.mu.Lock()
		require.Len(t, nc.sessions, 1)
		var first *session
		for _, s := range nc.sessions {
			first = s
		}
		nc.mu.Unlock()
		require.NoError(t, first.proc.Process.Kill())
		<-first.exited
		// (Not compared: the new session's namespaces may have the old
		// one's numbers, a number being reused once its namespace is gone.)
		again, r := runShell(t, &nc, p, "readlink /proc/self/ns/net")
		require.Equal(t, 0, r.ExitCode, again)
		nc.mu.Lock()
		defer nc.mu.Unlock()
		require.Len(t, nc.sessions, 1)
		for _, s := range nc.sessions {
			assert.NotSame(t, first, s)
			assert.False(t, s.dead.Load(), "the replacement serves")
		}
	})
}

// TestNamespaceCacheProcessLimitAlone: a process limit kept by RLIMIT_NPROC
// (no cgroup, not root) counts the processes of the user namespace, so such
// a command never runs in a session's.
func TestNamespaceCacheProcessLimitAlone(t *testing.T) {
	if os.Geteuid() == 0 && os.Getenv("DSH_SANDBOX_TEST_AS_USER") != "1" {
		// Root is exempt from RLIMIT_NPROC and makes cgroups: the user's
		// half alone.
		asRootAndUser(t, func(t *testing.T) {
			if os.Geteuid() == 0 {
				t.Skip("root: see the user's half")
			}
		})
		return
	}
	needSession(t)
	var nc NamespaceCache
	defer nc.Close()
	p := sessionPolicy(t, modes.WorkspaceWrite, t.TempDir())
	p.Limits.MaxPids = 64
	out, r := runShell(t, &nc, p, "true")
	require.Equal(t, 0, r.ExitCode, out)
	if r.Enforcement.Limits != "rlimit" {
		t.Skipf("the limit is kept by %q here, not RLIMIT_NPROC", r.Enforcement.Limits)
	}
	nc.mu.Lock()
	defer nc.mu.Unlock()
	assert.Empty(t, nc.sessions)
}

// TestSessionRunnerRefusesBadRequests: a request the session runner cannot
// read is answered with EINVAL, forks nothing and leaks none of the
// descriptors that came with it; the session runner then serves the next
// command.
func TestSessionRunnerRefusesBadRequests(t *testing.T) {
	needSession(t)
	s, err := startSession(sessionKey{runner: selfExe, netns: true})
	require.NoError(t, err)
	defer s.close()
	null, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer null.Close()
	fds := func(n int) []byte {
		l := make([]int, n)
		for i := range l {
			l[i] = int(null.Fd())
		}
		return unix.UnixRights(l...)
	}
	openFDs := func() int {
		ents, err := os.ReadDir("/proc/" + strconv.Itoa(s.proc.Process.Pid) + "/fd")
		require.NoError(t, err)
		return len(ents)
	}
	before := -1
	if os.Geteuid() == 0 {
		before = openFDs() // (not dumpable: root alone reads it)
	}
	good := runner.SessionCommand(4, false, 0o22, []string{"true"}, nil)
	for _, c := range []struct {
		name string
		req  []byte
		oob  []byte
	}{
		{"bad magic", append([]byte("dsh1\x00"), good[5:]...), fds(5)},
		{"not a command", runner.SessionTokens(true), fds(5)},
		{"too few files", good, fds(4)},
		{"too many files", good, fds(6)},
		{"no control socket", runner.SessionCommand(3, false, 0o22, []string{"true"}, nil), fds(4)},
		{"argc past the end", bytes.Replace(good, []byte("\x001\x00true"), []byte("\x009\x00true"), 1), fds(5)},
		{"no argv", runner.SessionCommand(4, false, 0o22, nil, nil), fds(5)},
		{"cgroup without its file", runner.SessionCommand(4, true, 0o22, []string{"true"}, nil), fds(5)},
	} {
		require.NoError(t, runner.SendBytes(s.sock, c.req, c.oob), c.name)
		var m runner.Msg
		_, err := runner.RecvMsg(s.sock, &m)
		require.NoError(t, err, c.name)
		assert.Equal(t, runner.MsgFail, m.Kind, c.name)
		assert.Equal(t, int(unix.EINVAL), m.Errno, "%s: %s", c.name, m.Detail)
	}
	if before >= 0 {
		assert.Equal(t, before, openFDs(), "descriptors left in the session runner")
	}
	p := sessionPolicy(t, modes.WorkspaceWrite, t.TempDir())
	out, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer out.Close()
	key, err := sessionKeyOf(selfExe, p, "")
	require.NoError(t, err)
	nc := &NamespaceCache{sessions: map[sessionKey]*session{key: s}}
	c := &Cmd{Policy: p, Path: "/bin/bash", Args: []string{"bash", "-c", "readlink /proc/self/ns/user"}, Dir: p.Workspace, Stdout: out, Namespaces: nc}
	r, err := c.Run()
	require.NoError(t, err)
	assert.Equal(t, 0, r.ExitCode)
	b, err := os.ReadFile(out.Name())
	require.NoError(t, err)
	assert.False(t, s.dead.Load())
	if os.Geteuid() == 0 {
		userNS, err := os.Readlink("/proc/" + strconv.Itoa(s.proc.Process.Pid) + "/ns/user")
		require.NoError(t, err)
		assert.Equal(t, userNS+"\n", string(b), "the command did not run in the session")
	}
}

// TestNamespaceCacheCommandInItsCgroup: a runner forked by a session runner
// starts in the command's cgroup (cgroup v2: cloned into it; v1: it joins
// each hierarchy itself), not in the session runner's.
func TestNamespaceCacheCommandInItsCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a cgroup of the command's own needs root (or a delegated tree) here")
	}
	needSession(t)
	var nc NamespaceCache
	defer nc.Close()
	p := sessionPolicy(t, modes.WorkspaceWrite, t.TempDir())
	p.Limits.MaxPids = 100
	out, r := runShell(t, &nc, p, "cat /proc/self/cgroup")
	require.Equal(t, 0, r.ExitCode, out)
	if r.Enforcement.Limits != "cgroup-v1" && r.Enforcement.Limits != "cgroup-v2" {
		t.Skipf("no cgroup here (%q)", r.Enforcement.Limits)
	}
	require.Equal(t, 1, sessionCount(&nc), "the command did not run in the session")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.SplitN(line, ":", 3)
		require.Len(t, f, 3, line)
		if f[1] == "" || strings.Contains(f[1], "pids") || strings.Contains(f[1], "memory") || strings.Contains(f[1], "freezer") {
			// v2's one line, and v1's hierarchies the group joins.
			if f[1] == "" && r.Enforcement.Limits == "cgroup-v1" {
				continue
			}
			assert.Contains(t, f[2], "/dsh-sandbox-", line)
		}
	}
}

// TestNamespaceCacheSharesByPolicy: commands of one workspace and mode but
// of different policies (another writable root) never share a session, so
// that none can ask a server of the other's to write where it may not.
func TestNamespaceCacheSharesByPolicy(t *testing.T) {
	needSession(t)
	var nc NamespaceCache
	defer nc.Close()
	ws := t.TempDir()
	p := sessionPolicy(t, modes.WorkspaceWrite, ws)
	// (Not under the temporary directory, a writable root already.)
	extra, err := os.MkdirTemp("/var/tmp", "dsh-session-")
	require.NoError(t, err)
	defer os.Remove(extra)
	wider, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws, AllowWrite: []string{extra}})
	require.NoError(t, err)
	wider.Limits = modes.Limits{}
	require.NotEqual(t, p.WritableRoots, wider.WritableRoots)
	runShell(t, &nc, p, "true")
	runShell(t, &nc, p, "true")
	assert.Equal(t, 1, sessionCount(&nc))
	runShell(t, &nc, wider, "true")
	assert.Equal(t, 2, sessionCount(&nc), "another policy, another session")
}

// TestNamespaceCacheEnvironmentAsExec: the environment a forked runner gives
// the command is the one os/exec would give a spawned runner's: the last of
// the entries of one name (a caller's override appended to os.Environ()).
func TestNamespaceCacheEnvironmentAsExec(t *testing.T) {
	needSession(t)
	var nc NamespaceCache
	defer nc.Close()
	p := sessionPolicy(t, modes.WorkspaceWrite, t.TempDir())
	run := func(nc *NamespaceCache) string {
		out, err := os.CreateTemp(t.TempDir(), "out")
		require.NoError(t, err)
		defer out.Close()
		env := []string{"PATH=/usr/bin:/bin", "DSH_DUP=first", "", "DSH_DUP=last", "DSH_ONE=1"}
		c := &Cmd{Policy: p, Path: "/usr/bin/env", Args: []string{"env"}, Env: env, Dir: p.Workspace, Stdout: out, Namespaces: nc}
		r, err := c.Run()
		require.NoError(t, err)
		require.Equal(t, 0, r.ExitCode)
		b, err := os.ReadFile(out.Name())
		require.NoError(t, err)
		return string(b)
	}
	alone := run(nil)
	assert.Equal(t, alone, run(&nc))
	assert.Contains(t, alone, "DSH_DUP=last\n")
	assert.NotContains(t, alone, "DSH_DUP=first")
	assert.Equal(t, 1, sessionCount(&nc))
}

// TestNamespaceCacheRequestTooLarge: a command whose argv and environment
// exceed what the session runner's socket takes gets a runner of its own,
// and the session runner goes on serving the next command.
func TestNamespaceCacheRequestTooLarge(t *testing.T) {
	needSession(t)
	var nc NamespaceCache
	defer nc.Close()
	p := sessionPolicy(t, modes.WorkspaceWrite, t.TempDir())
	const netns = "readlink /proc/self/ns/net"
	first, _ := runShell(t, &nc, p, netns)
	nc.mu.Lock()
	var s *session
	for _, v := range nc.sessions {
		s = v
	}
	nc.mu.Unlock()
	require.NotNil(t, s)
	s.maxRequest = 4096
	out, r := runShell(t, &nc, p, netns+" # "+strings.Repeat("x", 8192))
	assert.Equal(t, 0, r.ExitCode, out)
	assert.NotEqual(t, first, out, "the large request went to the session runner")
	assert.False(t, s.dead.Load(), "a request too large ended the session runner")
	again, _ := runShell(t, &nc, p, netns)
	assert.Equal(t, first, again, "the session runner serves the next command")
	nc.mu.Lock()
	assert.Same(t, s, nc.sessions[func() sessionKey { k, _ := sessionKeyOf(selfExe, p, ""); return k }()])
	nc.mu.Unlock()
}

// TestNamespaceCacheBounded: a cache keeps at most maxSessions session
// runners; a new policy's ends the one used least recently.
func TestNamespaceCacheBounded(t *testing.T) {
	needSession(t)
	var nc NamespaceCache
	defer nc.Close()
	// Each policy of another workspace.
	var first *session
	for i := 0; i <= maxSessions; i++ {
		p := sessionPolicy(t, modes.WorkspaceWrite, t.TempDir())
		runShell(t, &nc, p, "true")
		if i == 0 {
			nc.mu.Lock()
			for _, s := range nc.sessions {
				first = s
			}
			nc.mu.Unlock()
		}
	}
	assert.Equal(t, maxSessions, sessionCount(&nc))
	require.NotNil(t, first)
	select {
	case <-first.exited:
	case <-time.After(testtime.Scale(10 * time.Second)):
		t.Fatal("the session runner used least recently was not ended")
	}
}
