//go:build linux

package supervisor

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// A sandbox in miniature: one OS thread of the test process whose socket
// and pidfd calls a seccomp filter routes to a Notifier, as a command's are.
// The thread shares the process's descriptors, memory and namespaces, so the
// notifier reads, resolves and replaces exactly as for a command.

// The main goroutine keeps the main thread, so no filtered thread is the
// main thread: the runtime ends a locked thread when its goroutine does,
// but parks the main thread instead, filter and all.
func init() { runtime.LockOSThread() }

// routedCalls are the calls the thread's filter notifies.
var routedCalls = []string{"connect", "bind", "sendto", "sendmsg", "sendmmsg", "pidfd_send_signal"}

// sandboxThread runs functions on the filtered thread.
type sandboxThread struct{ calls chan func() }

func (s sandboxThread) do(f func()) {
	done := make(chan struct{})
	s.calls <- func() { f(); close(done) }
	<-done
}

// notifyProgram is a filter that allows everything but notifies calls.
func notifyProgram(t *testing.T, calls []string) []byte {
	t.Helper()
	f, err := libseccomp.NewFilter(libseccomp.ActAllow)
	require.NoError(t, err)
	defer f.Release()
	for _, name := range calls {
		nr, err := libseccomp.GetSyscallFromName(name)
		require.NoError(t, err)
		require.NoError(t, f.AddRule(nr, libseccomp.ActNotify))
	}
	fd, err := unix.MemfdCreate("bpf", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	mf := os.NewFile(uintptr(fd), "bpf")
	defer mf.Close()
	require.NoError(t, f.ExportBPF(mf))
	b, err := io.ReadAll(io.NewSectionReader(mf, 0, 1<<20))
	require.NoError(t, err)
	require.NotEmpty(t, b)
	return b
}

// startSandbox starts a filtered thread and a Notifier for it under policy
// p (writable root ws); copies says whether the notifier may use
// pidfd_getfd. It returns the thread and the notifier's denial log.
func startSandbox(t *testing.T, ws string, copies, sharedFS bool, setup ...func(*Notifier)) (sandboxThread, *facts.Log) {
	t.Helper()
	s, log, _ := startRouted(t, ws, routedCalls, copies, sharedFS, setup...)
	return s, log
}

// startRouted is startSandbox with the thread's calls in routed notified,
// and the Notifier returned too.
func startRouted(t *testing.T, ws string, routed []string, copies, sharedFS bool, setup ...func(*Notifier)) (sandboxThread, *facts.Log, *Notifier) {
	t.Helper()
	if !seccomp.NotifySupported() {
		t.Skip("no seccomp user notification here")
	}
	prog := notifyProgram(t, routed)
	calls := make(chan func())
	lfd := make(chan int, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with its filter
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			lfd <- -1
			return
		}
		fprog := unix.SockFprog{Len: uint16(len(prog) / 8), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
		fd, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
		runtime.KeepAlive(prog)
		if e != 0 {
			lfd <- -1
			return
		}
		lfd <- int(fd)
		for f := range calls {
			f()
		}
	}()
	fd := <-lfd
	require.GreaterOrEqual(t, fd, 0, "load the thread's filter")
	p := modes.Policy{Mode: modes.WorkspaceWrite, Workspace: ws, WritableRoots: []string{ws}}
	log := facts.NewLog()
	n, err := NewNotifier(fd, Config{Spec: seccomp.Spec{Notify: true, Signals: true}, Policy: p, Denials: log, Relay: os.Getpid()})
	require.NoError(t, err)
	if !copies {
		n.NoPidfdGetfd()
	}
	n.restricted.sharedFS = sharedFS
	for _, f := range setup {
		f(n)
	}
	go n.Run()
	t.Cleanup(func() {
		close(calls) // the thread ends, and with it the filter's last user
		n.Finish(5 * time.Second)
	})
	return sandboxThread{calls: calls}, log, n
}

// strategies are the ways the notifier reaches a command's sockets.
var strategies = []struct {
	name             string
	copies, sharedFS bool
}{
	{"pidfd_getfd", true, false},
	{"replace", false, false},
	{"replace, no unshare(CLONE_FS)", false, true},
}

func workspace(t *testing.T) string {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return ws
}

// fdState reports FD_CLOEXEC and O_NONBLOCK of fd.
func fdState(t *testing.T, fd int) (cloexec, nonblock bool) {
	t.Helper()
	fdfl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	require.NoError(t, err)
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	require.NoError(t, err)
	return fdfl&unix.FD_CLOEXEC != 0, fl&unix.O_NONBLOCK != 0
}

// TestSocketsBindConnect: a server and its clients in the workspace work on
// every strategy, at the command's descriptor numbers, with the command's
// O_CLOEXEC and O_NONBLOCK and the mode it gave its socket, and leave no
// denial; connecting a connected stream socket is EISCONN, binding a bound
// one EINVAL, as from the kernel.
func TestSocketsBindConnect(t *testing.T) {
	for _, st := range strategies {
		t.Run(st.name, func(t *testing.T) {
			ws := workspace(t)
			s, log := startSandbox(t, ws, st.copies, st.sharedFS)
			path := filepath.Join(ws, "s.sock")
			var srv, cli, cli2 int
			var bindErr, connErr, conn2Err, again, rebind error
			s.do(func() {
				srv, _ = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				unix.Fchmod(srv, 0o640) // the socket file gets it (less the umask)
				bindErr = unix.Bind(srv, &unix.SockaddrUnix{Name: path})
				rebind = unix.Bind(srv, &unix.SockaddrUnix{Name: path + "2"})
				unix.Listen(srv, 8)
				cli, _ = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
				connErr = unix.Connect(cli, &unix.SockaddrUnix{Name: path})
				again = unix.Connect(cli, &unix.SockaddrUnix{Name: path})
				cli2, _ = unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0)
				conn2Err = unix.Connect(cli2, &unix.SockaddrUnix{Name: path})
			})
			defer unix.Close(srv)
			defer unix.Close(cli)
			defer unix.Close(cli2)
			require.NoError(t, bindErr)
			assert.ErrorIs(t, rebind, unix.EINVAL)
			require.NoError(t, connErr)
			assert.ErrorIs(t, again, unix.EISCONN)
			assert.ErrorIs(t, conn2Err, unix.EPROTOTYPE, "a seqpacket socket cannot reach a stream one")
			// A failed connect leaves a socket as fresh as it was (a
			// replacement is installed before the connect).
			var st2 unix.Stat_t
			require.NoError(t, unix.Fstat(cli2, &st2))
			if d, err := unixDiag(uint32(st2.Ino)); assert.NoError(t, err) {
				assert.Equal(t, unix.SOCK_SEQPACKET, d.typ)
				assert.True(t, d.fresh())
			}
			cloexec2, _ := fdState(t, cli2)
			assert.False(t, cloexec2, "no O_CLOEXEC where the command had none")

			// The name is the one bound in the pinned directory (its base,
			// or /proc/self/fd/N/base without unshare(CLONE_FS)), not the
			// path the command gave.
			sa, err := unix.Getsockname(srv)
			require.NoError(t, err)
			assert.Equal(t, "s.sock", filepath.Base(sa.(*unix.SockaddrUnix).Name), "the command's descriptor is the bound socket")
			var fst unix.Stat_t
			require.NoError(t, unix.Lstat(path, &fst))
			umask := unix.Umask(0)
			unix.Umask(umask)
			assert.Equal(t, uint32(0o640)&^uint32(umask), fst.Mode&0o777, "the socket file's mode")
			pa, err := unix.Getpeername(cli)
			require.NoError(t, err)
			assert.Equal(t, sa, pa, "connected to the server")
			cloexec, nonblock := fdState(t, cli)
			assert.True(t, cloexec, "O_CLOEXEC kept")
			assert.True(t, nonblock, "O_NONBLOCK kept")
			cloexec, nonblock = fdState(t, srv)
			assert.True(t, cloexec)
			assert.False(t, nonblock)
			c, _, err := unix.Accept(srv)
			require.NoError(t, err)
			defer unix.Close(c)
			_, err = unix.Write(cli, []byte("ping"))
			require.NoError(t, err)
			buf := make([]byte, 8)
			k, err := unix.Read(c, buf)
			require.NoError(t, err)
			assert.Equal(t, "ping", string(buf[:k]))
			assert.Empty(t, log.List())
		})
	}
}

// TestSocketsNoCopyRefusals: without pidfd_getfd what cannot be replaced
// or sent from a fresh socket is refused with EACCES and a fact saying so,
// and nothing reaches the destination; what can (a datagram from an
// unbound socket) arrives; a host listener the sandbox did not bind is
// never reached, whatever the strategy.
func TestSocketsNoCopyRefusals(t *testing.T) {
	ws := workspace(t)
	s, log := startSandbox(t, ws, false, false)
	srvPath, cliPath, hostPath := filepath.Join(ws, "d.sock"), filepath.Join(ws, "c.sock"), filepath.Join(ws, "host.sock")

	host, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	require.NoError(t, err)
	defer unix.Close(host)
	require.NoError(t, unix.Bind(host, &unix.SockaddrUnix{Name: hostPath})) // not through the notifier: a host listener
	require.NoError(t, unix.Listen(host, 8))

	var srv, bound, fresh, stream, toHost int
	errs := map[string]error{}
	s.do(func() {
		srv, _ = unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		errs["bind server"] = unix.Bind(srv, &unix.SockaddrUnix{Name: srvPath})
		bound, _ = unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		errs["bind client"] = unix.Bind(bound, &unix.SockaddrUnix{Name: cliPath})
		errs["connect bound"] = unix.Connect(bound, &unix.SockaddrUnix{Name: srvPath})
		errs["sendto bound"] = unix.Sendto(bound, []byte("from-bound"), 0, &unix.SockaddrUnix{Name: srvPath})
		fresh, _ = unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		errs["sendto fresh"] = unix.Sendto(fresh, []byte("from-fresh"), 0, &unix.SockaddrUnix{Name: srvPath})
		_, errs["sendmsg rights"] = unix.SendmsgN(fresh, []byte("rights"), unix.UnixRights(0), &unix.SockaddrUnix{Name: srvPath}, 0)
		_, errs["sendmsg unconnected"] = unix.SendmsgN(fresh, []byte("x"), nil, nil, 0)
		errs["connect fresh"] = unix.Connect(fresh, &unix.SockaddrUnix{Name: srvPath})
		_, errs["sendmsg connected"] = unix.SendmsgN(fresh, []byte("connected"), nil, nil, 0)
		errs["reconnect"] = unix.Connect(fresh, &unix.SockaddrUnix{Name: srvPath})
		stream, _ = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		errs["sendto stream"] = unix.Sendto(stream, []byte("s"), 0, &unix.SockaddrUnix{Name: srvPath})
		toHost, _ = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		errs["connect host"] = unix.Connect(toHost, &unix.SockaddrUnix{Name: hostPath})
		errs["bind abstract"] = unix.Bind(toHost, &unix.SockaddrUnix{Name: "@dsh-squat-" + strconv.Itoa(os.Getpid())})
		errs["autobind"] = unix.Bind(toHost, &unix.SockaddrUnix{})
	})
	for _, fd := range []int{srv, bound, fresh, stream, toHost} {
		defer unix.Close(fd)
	}
	for name, want := range map[string]unix.Errno{
		"bind server": 0, "bind client": 0, "sendto fresh": 0, "connect fresh": 0, "autobind": 0,
		"connect bound": unix.EACCES, "sendto bound": unix.EACCES, "sendmsg rights": unix.EACCES,
		"sendmsg connected": unix.EACCES, "reconnect": unix.EACCES, "connect host": unix.EACCES, "bind abstract": unix.EPERM,
		"sendmsg unconnected": unix.ENOTCONN, "sendto stream": unix.EOPNOTSUPP,
	} {
		if want == 0 {
			assert.NoError(t, errs[name], name)
		} else {
			assert.ErrorIs(t, errs[name], want, name)
		}
	}
	// The world: the server got the fresh socket's datagram only, the host
	// listener nothing, the bound client keeps its name.
	buf := make([]byte, 64)
	k, _, err := unix.Recvfrom(srv, buf, 0)
	require.NoError(t, err)
	assert.Equal(t, "from-fresh", string(buf[:k]))
	_, _, err = unix.Recvfrom(srv, buf, 0)
	assert.ErrorIs(t, err, unix.EAGAIN, "nothing else arrived")
	_, _, err = unix.Accept(host)
	assert.ErrorIs(t, err, unix.EAGAIN, "the host listener saw no connection")
	sa, err := unix.Getsockname(bound)
	require.NoError(t, err)
	assert.Equal(t, filepath.Base(cliPath), sa.(*unix.SockaddrUnix).Name)
	sa, err = unix.Getsockname(toHost)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(sa.(*unix.SockaddrUnix).Name, "@"), "autobind: an abstract name")

	// A connect is answered from a goroutine, which adds its fact once the
	// answer is sent: the thread may read the log first.
	byTarget := map[string][]facts.Denial{}
	assert.Eventually(t, func() bool {
		clear(byTarget)
		for _, d := range log.List() {
			byTarget[d.Op+" "+d.Target()] = append(byTarget[d.Op+" "+d.Target()], d)
		}
		return len(byTarget["connect "+hostPath]) > 0
	}, 5*time.Second, 5*time.Millisecond, "the fact of the host connect")
	for _, key := range []string{"connect " + srvPath, "send " + srvPath, "send fd " + strconv.Itoa(fresh)} {
		ds := byTarget[key]
		if assert.NotEmpty(t, ds, "a fact for %s: %+v", key, log.List()) {
			for _, d := range ds {
				assert.Contains(t, d.Reason, "no pidfd_getfd", key)
				assert.Equal(t, "EACCES", d.Errno, key)
			}
		}
	}
	if ds := byTarget["connect "+hostPath]; assert.Len(t, ds, 1) {
		assert.Empty(t, ds[0].Reason, "a host socket is denied as on any host")
	}
	assert.Len(t, byTarget["bind @dsh-squat-"+strconv.Itoa(os.Getpid())], 1)
}

// TestSocketsReplaceRace: a thread flipping the address between a
// workspace socket and a host listener while the filtered thread connects
// never reaches the host listener (the address is read once, and the
// connect is the supervisor's).
func TestSocketsReplaceRace(t *testing.T) {
	for _, st := range strategies[:2] {
		t.Run(st.name, func(t *testing.T) {
			ws := workspace(t)
			s, _ := startSandbox(t, ws, st.copies, false)
			own, hostPath := filepath.Join(ws, "own.sock"), filepath.Join(ws, "h.sock")
			host, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
			require.NoError(t, err)
			defer unix.Close(host)
			require.NoError(t, unix.Bind(host, &unix.SockaddrUnix{Name: hostPath}))
			require.NoError(t, unix.Listen(host, 512))
			var srv int
			s.do(func() {
				srv, _ = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
				unix.Bind(srv, &unix.SockaddrUnix{Name: own})
				unix.Listen(srv, 512)
			})
			defer unix.Close(srv)
			// A raw sockaddr_un whose path the flipper rewrites.
			var sa unix.RawSockaddrUnix
			sa.Family = unix.AF_UNIX
			set := func(p string) {
				for i := range sa.Path {
					sa.Path[i] = 0
				}
				for i := 0; i < len(p); i++ {
					sa.Path[i] = int8(p[i])
				}
			}
			set(own)
			stop := make(chan struct{})
			flipped := make(chan struct{})
			go func() {
				defer close(flipped)
				for {
					select {
					case <-stop:
						return
					default:
					}
					set(hostPath)
					set(own)
				}
			}()
			s.do(func() {
				for i := 0; i < 200; i++ {
					fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
					if err != nil {
						continue
					}
					unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
					unix.Close(fd)
				}
			})
			close(stop)
			<-flipped
			_, _, err = unix.Accept(host)
			assert.ErrorIs(t, err, unix.EAGAIN, "the host listener got a connection")
		})
	}
}

// TestPidfdSignal: pidfd_send_signal reaches the sandbox's processes (the
// relay's descendants) and no other, with a copy of the pidfd or, without
// pidfd_getfd, a pidfd of the supervisor's own; a descriptor that is no
// pidfd is refused.
func TestPidfdSignal(t *testing.T) {
	for _, st := range strategies[:2] {
		t.Run(st.name, func(t *testing.T) {
			s, log := startSandbox(t, workspace(t), st.copies, false)
			child := exec.Command("sleep", "60")
			require.NoError(t, child.Start())
			defer child.Process.Kill()
			own, err := unix.PidfdOpen(child.Process.Pid, 0)
			require.NoError(t, err)
			defer unix.Close(own)
			host, err := unix.PidfdOpen(os.Getppid(), 0) // not a descendant of the "relay" (this process)
			require.NoError(t, err)
			defer unix.Close(host)
			null, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			require.NoError(t, err)
			defer unix.Close(null)
			send := func(fd int, sig unix.Signal) error {
				_, _, e := unix.Syscall6(unix.SYS_PIDFD_SEND_SIGNAL, uintptr(fd), uintptr(sig), 0, 0, 0, 0)
				if e != 0 {
					return e
				}
				return nil
			}
			var toHost, toNull, toChild error
			s.do(func() {
				toHost = send(host, 0)
				toNull = send(null, 0)
				toChild = send(own, unix.SIGKILL)
			})
			assert.ErrorIs(t, toHost, unix.EPERM)
			assert.ErrorIs(t, toNull, unix.EPERM)
			require.NoError(t, toChild)
			err = child.Wait()
			assert.Error(t, err, "the child was killed")
			assert.Contains(t, err.Error(), "killed")
			var targets []string
			for _, d := range log.List() {
				targets = append(targets, d.Target())
			}
			assert.ElementsMatch(t, []string{"pid " + strconv.Itoa(os.Getppid()), "fd " + strconv.Itoa(null)}, targets)
		})
	}
}

// TestUnixDiag: what sock_diag tells of a unix socket by its inode.
func TestUnixDiag(t *testing.T) {
	ino := func(fd int) uint32 {
		var st unix.Stat_t
		require.NoError(t, unix.Fstat(fd, &st))
		return uint32(st.Ino)
	}
	ws := workspace(t)
	fresh, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fresh)
	lis, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(lis)
	require.NoError(t, unix.Bind(lis, &unix.SockaddrUnix{Name: filepath.Join(ws, "l")}))
	require.NoError(t, unix.Listen(lis, 1))
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	inet, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(inet)

	got, err := unixDiag(ino(fresh))
	if err != nil {
		t.Skipf("sock_diag for unix sockets unavailable: %v", err)
	}
	assert.Equal(t, cmdSocket{typ: unix.SOCK_DGRAM, state: tcpClose}, got)
	assert.True(t, got.fresh())
	got, err = unixDiag(ino(lis))
	require.NoError(t, err)
	assert.Equal(t, cmdSocket{typ: unix.SOCK_STREAM, state: tcpListen, bound: true}, got)
	got, err = unixDiag(ino(pair[0]))
	require.NoError(t, err)
	assert.Equal(t, cmdSocket{typ: unix.SOCK_SEQPACKET, state: tcpEstablished, peer: true}, got)
	assert.False(t, got.fresh())
	_, err = unixDiag(ino(inet))
	assert.ErrorIs(t, err, unix.ENOENT, "not a unix socket")
}

// TestFailsAnyway: removing a directory that holds a protected path is
// answered as the kernel would when it fails anyway (git stash and git
// checkout rmdir .git), so no denial is recorded for it.
func TestFailsAnyway(t *testing.T) {
	ws := workspace(t)
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "full/x"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(ws, "empty"), 0o755))
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(root)
	for _, tc := range []struct {
		dir, call string
		args      [6]uint64
		want      unix.Errno
	}{
		{"full", "rmdir", [6]uint64{}, unix.ENOTEMPTY},
		{"full", "unlinkat", [6]uint64{2: unix.AT_REMOVEDIR}, unix.ENOTEMPTY},
		{"full", "unlinkat", [6]uint64{}, unix.EISDIR},
		{"full", "unlink", [6]uint64{}, unix.EISDIR},
		{"empty", "rmdir", [6]uint64{}, 0},
		{"missing", "rmdir", [6]uint64{}, 0},
	} {
		assert.Equal(t, tc.want, failsAnyway(root, filepath.Join(ws, tc.dir), tc.call, tc.args), "%s %s", tc.call, tc.dir)
	}
}

// TestCmdPidfd: a pidfd's pid and thread flag from its fdinfo; anything
// else is no pidfd.
func TestCmdPidfd(t *testing.T) {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	pid, thread, ok := cmdPidfd(os.Getpid(), fd)
	assert.True(t, ok)
	assert.False(t, thread)
	assert.Equal(t, os.Getpid(), pid)
	_, _, ok = cmdPidfd(os.Getpid(), 0)
	assert.False(t, ok, "stdin is no pidfd")
}
