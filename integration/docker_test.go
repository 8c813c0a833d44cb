//go:build linux

package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Docker's default seccomp profile without CAP_SYS_PTRACE, simulated by
// `degrade docker`: no user namespace (so no mount view, no pid, net or ipc
// namespace), no unshare(CLONE_FS), and no pidfd_getfd. Seccomp user
// notification works (the listener reaches the supervisor by SCM_RIGHTS),
// so a supervisor reports denials, performs metadata changes and emulates
// socket calls — by replacing the command's fresh sockets, since it cannot
// copy them — and the protected paths are not carved out of Landlock's
// roots (the supervisor pre-denies them, the audit sets aside what got
// through). A kernel without user notification: nonotify_test.go.

var degradedDocker = degradation{
	name: "docker seccomp profile",
	wrap: func() []string { return []string{degradeBin, "docker"} },
	need: func(t *testing.T, id identity) {
		needHelper(t)
		requireLandlock(t) // the only filesystem layer left
	},
}

// dockerMissing is the exact list of what mode lacks under Docker's profile
// (limits aside: limits_test.go).
func dockerMissing(t *testing.T, mode string) []string {
	t.Helper()
	requireLandlock(t)
	var m []string
	if mode == "workspace-write" {
		m = append(m, "protected-paths") // no mount view: pre-denial and audit
	}
	return append(m, "process-visibility", "secret-masks-mount")
}

// TestDockerProbe: the probe and a run's report say that Docker's profile
// has a supervisor (user notification, no pidfd_getfd) and lacks only what
// no namespace gives; a network allowlist stays unavailable there.
func TestDockerProbe(t *testing.T) {
	d := degradedDocker
	forEachIdentity(t, func(t *testing.T, id identity) {
		d.need(t, id)
		r := id.run(t, runOpts{Wrap: d.wrap(), Flags: []string{"--probe", "--json"}, NoReport: true, Dir: id.workspace(t)})
		requireExit(t, r, 0)
		p := parseProbe(t, r)
		var seccomp struct {
			Seccomp struct {
				Notify     bool `json:"notify"`
				PidfdGetfd bool `json:"pidfdGetfd"`
			} `json:"seccomp"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &seccomp); err != nil {
			t.Fatal(err)
		}
		if !p.Seccomp.Available || !seccomp.Seccomp.Notify || seccomp.Seccomp.PidfdGetfd {
			t.Errorf("seccomp = %+v, want available, user notification, no pidfd_getfd", seccomp.Seccomp)
		}
		if !p.Confined || p.Allowlist != "unavailable" {
			t.Errorf("confined = %v, allowlist = %q; want true, unavailable", p.Confined, p.Allowlist)
		}
		for _, m := range confinedModes {
			pm := p.Modes[m]
			if want := dockerMissing(t, m); pm.Enforcement != "partial" || !slices.Equal(withoutLimits(pm.Missing), want) {
				t.Errorf("modes[%s] = %+v, want partial, missing %v", m, pm, want)
			}
			if !contains(pm.Layers, "seccomp-notify") || contains(pm.Layers, "mount-view") || !contains(pm.Layers, "landlock") {
				t.Errorf("modes[%s].layers = %v, want landlock and seccomp-notify, no mount view", m, pm.Layers)
			}
		}
		rt := id.run(t, runOpts{Wrap: d.wrap(), Flags: []string{"--probe"}, NoReport: true, Dir: id.workspace(t)})
		requireExit(t, rt, 0)
		for _, want := range []string{"seccomp: yes (user notification: yes, no pidfd_getfd: sockets replaced, not copied)",
			"allowlist: unavailable (needs seccomp user notification and pidfd_getfd)"} {
			if !hasLine(rt.Stdout, want) {
				t.Errorf("text probe lacks %q:\n%s", want, rt.Stdout)
			}
		}
		for _, mode := range confinedModes {
			ws := id.workspace(t)
			r := id.run(t, runOpts{Wrap: d.wrap(), Flags: sandboxFlags(mode, ws), Argv: bash("true"), Dir: ws})
			requireExit(t, r, 0)
			requireNoDenials(t, r)
			if rep := requireReport(t, r); !slices.Equal(withoutLimits(rep.Enforcement.Missing), dockerMissing(t, mode)) {
				t.Errorf("%s: report missing = %v, want %v", mode, rep.Enforcement.Missing, dockerMissing(t, mode))
			}
		}
	})
}

// TestDockerEverydayGit: in an existing repository a command edits files,
// makes a new top-level file, adds, commits, branches, merges and stashes
// under Docker's profile, as root and as the test user — which the
// Landlock carve-out of a host without a supervisor cannot allow — and
// leaves no denial; the repository's hooks and config are as they were.
func TestDockerEverydayGit(t *testing.T) {
	d := degradedDocker
	forEachIdentity(t, func(t *testing.T, id identity) {
		d.need(t, id)
		ws := gitRepo(t, id)
		id.mkdirAt(t, filepath.Join(ws, "src"))
		id.writeOwned(t, filepath.Join(ws, "src/a.txt"), "one\n", 0o644)
		id.git(t, ws, "add", "-A")
		id.git(t, ws, "commit", "-q", "-m", "first")
		snap := snapGit(t, ws)
		r := id.run(t, runOpts{
			Wrap:  d.wrap(),
			Flags: sandboxFlags("workspace-write", ws),
			Argv: bash(`set -e
echo two >> src/a.txt
echo top > top.txt
git add -A
git commit -qm second
git checkout -qb feature
echo feature > src/f.txt
git add src/f.txt
git commit -qm feature
git checkout -q -
echo three >> src/a.txt
git commit -qam third
git merge -q --no-edit feature
echo wip >> src/a.txt
git stash -q
git stash list | grep -q WIP
test "$(tail -1 src/a.txt)" = three
git stash pop -q
git branch --list | grep -q feature
echo done`),
			Env: gitEnv,
			Dir: ws,
		})
		requireExit(t, r, 0)
		requireNoDenials(t, r)
		if !hasLine(r.Stdout, "done") {
			t.Errorf("stdout = %q, want done", r.Stdout)
		}
		requireContent(t, filepath.Join(ws, "src/a.txt"), "one\ntwo\nthree\nwip\n")
		requireContent(t, filepath.Join(ws, "src/f.txt"), "feature\n")
		requireContent(t, filepath.Join(ws, "top.txt"), "top\n")
		if parents := strings.Fields(id.git(t, ws, "rev-list", "--parents", "-n", "1", "HEAD")); len(parents) != 3 {
			t.Errorf("HEAD is not the merge commit: %v", parents)
		}
		if n := len(lines(strings.TrimSpace(id.git(t, ws, "log", "--oneline")))); n != 5 {
			t.Errorf("git log has %d commits, want 5 (first, second, feature, third, merge)", n)
		}
		if out := id.git(t, ws, "stash", "list"); strings.TrimSpace(out) != "" {
			t.Errorf("stash list = %q, want empty", out)
		}
		snap.requireUnchanged(t, ws)
		requireNoQuarantine(t, ws)
	})
}

// dockerSocketsScript runs a unix-socket server and its clients in the
// workspace (python3): a stream server whose socket mode is set before
// bind, a client with a timeout (O_NONBLOCK underneath, O_CLOEXEC) and one
// made inheritable, a datagram server reached by sendto from an unbound
// socket and by a connected one. It prints what it observes.
const dockerSocketsScript = `
import os, socket, threading
def flags(fd):
    for line in open("/proc/self/fdinfo/%d" % fd):
        if line.startswith("flags:"):
            return int(line.split()[1], 8)
O_NONBLOCK, O_CLOEXEC = 0o4000, 0o2000000
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
os.fchmod(srv.fileno(), 0o600)
srv.bind("py.sock")
srv.listen(8)
print("mode", oct(os.stat("py.sock").st_mode & 0o777))
def serve():
    for _ in range(2):
        c, _ = srv.accept()
        c.sendall(c.recv(64).upper())
        c.close()
threading.Thread(target=serve, daemon=True).start()
cl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
cl.settimeout(10)
fd = cl.fileno()
cl.connect(os.path.join(os.getcwd(), "py.sock"))
cl.sendall(b"hello")
print("reply", cl.recv(64).decode())
f = flags(fd)
print("nonblock", bool(f & O_NONBLOCK), "cloexec", bool(f & O_CLOEXEC), "same fd", cl.fileno() == fd)
inh = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
os.set_inheritable(inh.fileno(), True)
inh.connect("py.sock")
inh.sendall(b"again")
print("reply", inh.recv(64).decode())
print("inheritable cloexec", bool(flags(inh.fileno()) & O_CLOEXEC))
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
d.bind("dg.sock")
d.settimeout(10)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b"sent", "dg.sock")
print("dgram", d.recv(64).decode())
c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
c.connect("dg.sock")
c.send(b"connected")
print("dgram", d.recv(64).decode())
`

// nodeUnixServer is a node server on a unix socket and a client of it.
const nodeUnixServer = `
const net = require('net');
const srv = net.createServer(c => c.on('data', d => c.end(d.toString().toUpperCase())));
srv.listen(process.env.SOCK, () => {
  const c = net.connect(process.env.SOCK, () => c.write('node-served'));
  c.on('data', d => { console.log(d.toString()); srv.close(); });
});
`

// gounixHelper is the built integration/internal/gounix, a Go HTTP server
// on a unix socket and its client.
func gounixHelper(t *testing.T) string {
	t.Helper()
	if gounixErr != nil {
		t.Fatalf("integration/internal/gounix did not build: %v", gounixErr)
	}
	return gounixBin
}

// TestDockerUnixSockets: under Docker's profile, as root and as the test
// user, a unix-socket server in the workspace and its clients in the same
// command work — python3, a Go HTTP server, node — with the socket mode,
// O_NONBLOCK and O_CLOEXEC the command set; the command leaves no denial.
// (Without a supervisor every connect was denied in the kernel.)
func TestDockerUnixSockets(t *testing.T) {
	d := degradedDocker
	forEachIdentity(t, func(t *testing.T, id identity) {
		d.need(t, id)
		gobin := gounixHelper(t)
		node := ""
		if p, err := exec.LookPath("node"); err == nil {
			node = p
		}
		ws := id.workspace(t)
		script := `set -e
umask 022
python3 -c "$PY"
"$GOBIN" "$PWD/go.sock"
if [ -n "$NODE" ]; then SOCK=node.sock "$NODE" -e "$NODEJS"; fi
echo done`
		r := id.run(t, runOpts{
			Wrap:  d.wrap(),
			Flags: sandboxFlags("workspace-write", ws),
			Argv:  bash(script),
			Env:   []string{"PY=" + dockerSocketsScript, "GOBIN=" + gobin, "NODE=" + node, "NODEJS=" + nodeUnixServer},
			Dir:   ws,
		})
		requireExit(t, r, 0)
		requireNoDenials(t, r)
		want := []string{"mode 0o600", "reply HELLO", "nonblock True cloexec True same fd True", "reply AGAIN",
			"inheritable cloexec False", "dgram sent", "dgram connected", "go-served /0", "go-served /1", "go-served /2", "done"}
		if node != "" {
			want = append(want, "NODE-SERVED")
		} else {
			t.Log("node is not installed: its server is not run")
		}
		for _, w := range want {
			if !hasLine(r.Stdout, w) {
				t.Errorf("stdout lacks %q: %v", w, r)
			}
		}
	})
}

// hostUnixListener is a listener of the test process (a host service) on a
// unix socket anyone may connect to; it counts the connections it gets.
type hostUnixListener struct {
	name string
	got  atomic.Int32
}

func newHostUnixListener(t *testing.T, name string) *hostUnixListener {
	t.Helper()
	l, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(name, "@") {
		if err := os.Chmod(name, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	h := &hostUnixListener{name: name}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.got.Add(1)
			c.Close()
		}
	}()
	return h
}

// requireReasonedDenial asserts a denial fact with op, target and a reason
// containing reason, and its stderr line (which names the reason).
func requireReasonedDenial(t *testing.T, r result, mode, op, target, reason string) {
	t.Helper()
	for _, d := range requireReport(t, r).Denials {
		if d.Op != op || d.target() != target {
			continue
		}
		if !strings.Contains(d.Reason, reason) {
			t.Errorf("denial %v: reason %q, want it to contain %q", d, d.Reason, reason)
		}
		if line := fmt.Sprintf("%sdenied %s %s (%s mode, %s)", cliPrefix, op, target, mode, d.Reason); !hasDenialLine(r.Stderr, line) {
			t.Errorf("stderr lacks %q: %q", line, r.Stderr)
		}
		return
	}
	t.Errorf("no denial op=%s target=%s; denials=%v", op, target, requireReport(t, r).Denials)
}

// dockerDenialsScript tries what must not pass under Docker's profile
// (python3): host listeners in the workspace, outside it and abstract; a
// bound datagram socket connecting or sending (it cannot be replaced),
// SCM_RIGHTS, a sendmsg on a connected socket; and a connect whose address
// a thread flips between a socket of the command's and the host listener in
// the workspace. Each prints NAME ok|ERRNO.
const dockerDenialsScript = `
import array, ctypes, errno, os, socket, threading
HOST_WS, HOST_OUT, HOST_ABS = os.environ["HOST_WS"], os.environ["HOST_OUT"], os.environ["HOST_ABS"]
def tries(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
def conn(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    finally:
        s.close()
tries("host-ws", lambda: conn(HOST_WS))
tries("host-out", lambda: conn(HOST_OUT))
tries("host-abstract", lambda: conn("\0" + HOST_ABS))
srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
srv.bind("own.sock")
b = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
b.bind("client.sock")
tries("bound-connect", lambda: b.connect("own.sock"))
tries("bound-sendto", lambda: b.sendto(b"x", "own.sock"))
f = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
tries("rights", lambda: f.sendmsg([b"r"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0]))], 0, "own.sock"))
f.connect("own.sock")
tries("sendmsg-connected", lambda: f.sendmsg([b"c"]))
print("sendmsg-fd", f.fileno())
srv.setblocking(False)
got = 0
while True:
    try:
        srv.recv(64)
        got += 1
    except BlockingIOError:
        break
print("received", got)
lis = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
lis.bind("race.sock")
lis.listen(1024)
libc = ctypes.CDLL(None, use_errno=True)
class SA(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("path", ctypes.c_char * 108)]
own, host = os.path.join(os.getcwd(), "race.sock").encode() + b"\0", HOST_WS.encode() + b"\0"
sa = SA(socket.AF_UNIX, own)
stop = False
def flip():
    while not stop:
        ctypes.memmove(ctypes.addressof(sa) + 2, host, len(host))
        ctypes.memmove(ctypes.addressof(sa) + 2, own, len(own))
th = threading.Thread(target=flip)
th.start()
for i in range(300):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    libc.connect(s.fileno(), ctypes.byref(sa), ctypes.sizeof(sa))
    s.close()
stop = True
th.join()
print("race done")
`

// TestDockerSocketDenials: under Docker's profile no host listener is
// reached — in the workspace, outside it, abstract, nor by flipping a
// checked address — each refusal is a fact, and what the supervisor cannot
// replace or forward (a bound datagram socket, SCM_RIGHTS, a sendmsg on a
// connection) is refused with a fact that says the host cannot emulate it,
// nothing reaching the destination.
func TestDockerSocketDenials(t *testing.T) {
	d := degradedDocker
	const mode = "workspace-write"
	forEachIdentity(t, func(t *testing.T, id identity) {
		d.need(t, id)
		ws := id.workspace(t)
		hostWS := newHostUnixListener(t, filepath.Join(ws, "host.sock"))
		hostOut := newHostUnixListener(t, filepath.Join(id.outside(t), "host.sock"))
		abs := "dsh-it-host-" + nonce()
		hostAbs := newHostUnixListener(t, "@"+abs)
		r := id.run(t, runOpts{
			Wrap:  d.wrap(),
			Flags: sandboxFlags(mode, ws),
			Argv:  []string{"python3", "-c", dockerDenialsScript},
			Env:   []string{"HOST_WS=" + hostWS.name, "HOST_OUT=" + hostOut.name, "HOST_ABS=" + abs},
			Dir:   ws,
		})
		requireExit(t, r, 0)
		got := probeResults(r.Stdout)
		for name, want := range map[string]string{
			"host-ws": "EACCES", "host-out": "EACCES", "host-abstract": "EPERM", "bound-connect": "EACCES",
			"bound-sendto": "EACCES", "rights": "EACCES", "sendmsg-connected": "EACCES",
		} {
			if got[name] != want {
				t.Errorf("%s: %q, want %q", name, got[name], want)
			}
		}
		for _, w := range []string{"received 0", "race done"} {
			if !hasLine(r.Stdout, w) {
				t.Errorf("stdout lacks %q: %v", w, r)
			}
		}
		time.Sleep(100 * time.Millisecond) // an accept in flight would have counted by now
		for _, h := range []*hostUnixListener{hostWS, hostOut, hostAbs} {
			if n := h.got.Load(); n != 0 {
				t.Errorf("the host listener %s got %d connections", h.name, n)
			}
		}
		requireDenial(t, r, mode, "connect", hostWS.name)
		requireDenial(t, r, mode, "connect", hostOut.name)
		requireDenial(t, r, mode, "connect", "@"+abs)
		own := filepath.Join(ws, "own.sock")
		const noGetfd = "no pidfd_getfd on this host: "
		requireReasonedDenial(t, r, mode, "connect", own, noGetfd+"only a fresh socket can be replaced")
		requireReasonedDenial(t, r, mode, "send", own, noGetfd)
		requireReasonedDenial(t, r, mode, "send", "fd "+got["sendmsg-fd"], noGetfd+"sendmsg on a connected socket")
	})
}

// TestDockerAbstractSquat: under Docker's profile the command shares the
// host's network namespace, so an abstract name it bound would be one a host
// client connects to believing it reaches a host service. The bind is
// denied with a fact, and a real host client connecting to the name while
// the command runs gets ECONNREFUSED; autobind (a random name) stays
// allowed.
func TestDockerAbstractSquat(t *testing.T) {
	d := degradedDocker
	const mode = "workspace-write"
	forEachIdentity(t, func(t *testing.T, id identity) {
		d.need(t, id)
		ws := id.workspace(t)
		name := "dsh-it-squat-" + nonce()
		script := `
import errno, os, socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.bind("\0" + os.environ["NAME"])
    s.listen(8)
    print("bind ok")
except OSError as e:
    print("bind", errno.errorcode[e.errno])
a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
a.bind("")
print("autobind", a.getsockname()[:1] == b"\0")
open("ready", "w").close()
for i in range(1000):
    if os.path.exists("go"):
        break
    time.sleep(0.01)
`
		s := id.start(t, runOpts{Wrap: d.wrap(), Flags: sandboxFlags(mode, ws), Argv: []string{"python3", "-c", script},
			Env: []string{"NAME=" + name}, Dir: ws})
		if err := pollCond(20*time.Second, func() bool { return exists(filepath.Join(ws, "ready")) }); err != nil {
			t.Fatalf("the command did not get ready: %v", err)
		}
		c, err := net.Dial("unix", "@"+name)
		if err == nil {
			c.Close()
			t.Errorf("a host client reached the abstract name @%s the command bound", name)
		} else if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("a host client's connect to @%s: %v, want ECONNREFUSED", name, err)
		}
		id.writeOwned(t, filepath.Join(ws, "go"), "", 0o644)
		r := s.wait(t, 30*time.Second)
		requireExit(t, r, 0)
		for _, w := range []string{"bind EPERM", "autobind True"} {
			if !hasLine(r.Stdout, w) {
				t.Errorf("stdout lacks %q: %v", w, r)
			}
		}
		requireDenial(t, r, mode, "bind", "@"+name)
	})
}

// TestDockerPidfdSignal: under Docker's profile on a kernel whose Landlock
// does not scope signals (ABI 2, simulated) and without a pid namespace,
// pidfd_send_signal reaches the command's own child and no host process of
// the same user (the supervisor judges the pidfd by its fdinfo and sends
// through a pidfd of its own: it cannot copy the command's).
func TestDockerPidfdSignal(t *testing.T) {
	d := withABI2(degradedDocker)
	const mode = "workspace-write"
	forEachIdentity(t, func(t *testing.T, id identity) {
		d.need(t, id)
		host := exec.Command("sleep", "300")
		host.SysProcAttr = id.sysProcAttr()
		if err := host.Start(); err != nil {
			t.Fatal(err)
		}
		defer host.Process.Kill()
		ws := id.workspace(t)
		script := `
import errno, os, signal, subprocess
def tries(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
fd = os.pidfd_open(int(os.environ["HOST_PID"]))
tries("host", lambda: signal.pidfd_send_signal(fd, signal.SIGTERM))
child = subprocess.Popen(["sleep", "300"])
cfd = os.pidfd_open(child.pid)
tries("child", lambda: signal.pidfd_send_signal(cfd, signal.SIGKILL))
print("child status", child.wait())
`
		r := id.run(t, runOpts{Wrap: d.wrap(), Flags: sandboxFlags(mode, ws), Argv: []string{"python3", "-c", script},
			Env: []string{"HOST_PID=" + strconv.Itoa(host.Process.Pid)}, Dir: ws})
		requireExit(t, r, 0)
		got := probeResults(r.Stdout)
		if got["host"] != "EPERM" || got["child"] != "ok" || !hasLine(r.Stdout, "child status -9") {
			t.Errorf("host %q, child %q, want EPERM and ok, the child killed: %v", got["host"], got["child"], r)
		}
		if err := host.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("the host process is gone: %v", err)
		}
		requireDenial(t, r, mode, "signal", "pid "+strconv.Itoa(host.Process.Pid))
	})
}

// TestDockerNetworkInetBind: with --network under Docker's profile, bind
// is still routed (an abstract name would be the host's) and the supervisor
// cannot replace an inet socket (sock_diag does not list an unbound one):
// a TCP bind is refused with a fact that says so, and nothing listens on
// the port; a unix server and its client still work.
func TestDockerNetworkInetBind(t *testing.T) {
	d := degradedDocker
	const mode = "workspace-write"
	forEachIdentity(t, func(t *testing.T, id identity) {
		d.need(t, id)
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close() // a free port the command will try to listen on
		ws := id.workspace(t)
		script := `
import errno, os, socket, time
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(os.environ["PORT"])))
    s.listen(8)
    print("tcp ok")
except OSError as e:
    print("tcp", errno.errorcode[e.errno])
u = socket.socket(socket.AF_UNIX)
u.bind("n.sock")
u.listen(1)
c = socket.socket(socket.AF_UNIX)
c.connect("n.sock")
print("unix ok")
open("ready", "w").close()
for i in range(1000):
    if os.path.exists("go"):
        break
    time.sleep(0.01)
`
		s := id.start(t, runOpts{Wrap: d.wrap(), Flags: sandboxFlags(mode, ws, "--network"), Argv: []string{"python3", "-c", script},
			Env: []string{"PORT=" + strconv.Itoa(port)}, Dir: ws})
		if err := pollCond(20*time.Second, func() bool { return exists(filepath.Join(ws, "ready")) }); err != nil {
			t.Fatalf("the command did not get ready: %v", err)
		}
		// While the command runs: nothing of its listens on the port.
		if c, err := net.DialTimeout("tcp4", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
			c.Close()
			t.Errorf("something listens on the port the command was refused")
		}
		id.writeOwned(t, filepath.Join(ws, "go"), "", 0o644)
		r := s.wait(t, 30*time.Second)
		requireExit(t, r, 0)
		for _, w := range []string{"tcp EACCES", "unix ok"} {
			if !hasLine(r.Stdout, w) {
				t.Errorf("stdout lacks %q: %v", w, r)
			}
		}
		requireReasonedDenial(t, r, mode, "bind", "127.0.0.1:"+strconv.Itoa(port), "no pidfd_getfd on this host: only a unix socket can be replaced")
	})
}
