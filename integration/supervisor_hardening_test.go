//go:build linux

package integration

// The supervisor runs outside the sandbox, so nothing a command does may make
// it block on the command's behalf: every call it makes for the command is
// bounded and abandoned when the command is gone, and a stopped or killed
// helper process (the runner's relay, its inner keeper, the pid namespace's
// init) never stalls the result nor lets a process survive.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/integration/internal/harnessproto"
	"github.com/dsh-sandbox/dsh-sandbox/integration/internal/procscan"
	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
)

// hangPy is the payload of the emulated-call tests: python3 hang.py CASE
// [PATH] [TAG]. "blocking" is printed right before the call that blocks.
const hangPy = `import array, ctypes, os, signal, socket, struct, sys, threading, time
what = sys.argv[1]
path = sys.argv[2] if len(sys.argv) > 2 else ""
if path.startswith("own-"):
    # a peer of the command's own that never accepts (stream, backlog 0)
    # or never reads (datagram): the sandbox reaches only sockets it bound
    kind, path = path[4:].split(":", 1)
    peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM if kind == "stream" else socket.SOCK_DGRAM)
    peer.bind(path)
    if kind == "stream":
        peer.listen(0)

def fill(a):
    a.setblocking(False)
    try:
        while True:
            a.send(b"x" * 65536)
    except BlockingIOError:
        pass
    a.setblocking(True)

def rights(s):
    return [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [s.fileno()]))]

def sendmmsg(fd, data, flags=0, to=""):
    libc = ctypes.CDLL(None, use_errno=True)
    class iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    class msghdr(ctypes.Structure):
        _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(iovec)),
                    ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                    ("flags", ctypes.c_int)]
    class mmsghdr(ctypes.Structure):
        _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]
    buf = ctypes.create_string_buffer(data, len(data))
    iov = iovec(ctypes.cast(buf, ctypes.c_void_p), len(data))
    m = mmsghdr()
    m.hdr.iov = ctypes.pointer(iov)
    m.hdr.iovlen = 1
    if to:
        sa = ctypes.create_string_buffer(struct.pack("H", socket.AF_UNIX) + to.encode() + b"\0", 110)
        m.hdr.name, m.hdr.namelen = ctypes.cast(sa, ctypes.c_void_p), 2 + len(to) + 1
    r = libc.sendmmsg(fd, ctypes.byref(m), 1, flags)
    return r, ctypes.get_errno()

def timeval(s):
    return struct.pack("ll", int(s), int((s - int(s)) * 1e6))

def hold_backlog():
    # listen(0) on the host side: the first connection fills the backlog
    first = socket.socket(socket.AF_UNIX)
    first.connect(path)
    return first

if what == "sendmsg-rights":  # fill a socketpair, then pass its peer with SCM_RIGHTS
    a, b = socket.socketpair()
    fill(a)
    print("blocking", flush=True)
    a.sendmsg([b"y"], rights(b))
elif what == "sendmmsg":  # datagrams to a host socket that never reads
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    print("blocking", flush=True)
    while True:
        r = sendmmsg(s.fileno(), b"x" * 4096, 0, path)
        if r[0] != 1:
            print("sendmmsg", r)
            break
elif what == "sendto-full":  # a host datagram socket that never reads
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    print("blocking", flush=True)
    while True:
        s.sendto(b"x" * 4096, path)
elif what == "connect-backlog":  # a host listener that never accepts
    first = hold_backlog()
    s = socket.socket(socket.AF_UNIX)
    print("blocking", flush=True)
    s.connect(path)
elif what == "interrupted":  # a signal handler must run in the blocked caller
    class Alarm(Exception):
        pass
    def handler(sig, frame):
        print("handler", flush=True)
        raise Alarm()
    signal.signal(signal.SIGALRM, handler)
    a, b = socket.socketpair()
    fill(a)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        a.sendmsg([b"y"], rights(b))
        print("sent")
    except Alarm:
        print("interrupted")
elif what == "nonblocking":  # O_NONBLOCK and MSG_DONTWAIT: EAGAIN at once, like the kernel
    a, b = socket.socketpair()
    fill(a)
    a.setblocking(False)
    try:
        a.sendmsg([b"y"], rights(b))
        print("sent")
    except BlockingIOError:
        print("EAGAIN")
    a.setblocking(True)
    print("sendmmsg", sendmmsg(a.fileno(), b"y", socket.MSG_DONTWAIT))
    d = socket.socket(socket.AF_UNIX)
    first = hold_backlog()
    d.setblocking(False)
    try:
        d.connect(path)
        print("connected")
    except BlockingIOError:
        print("connect EAGAIN")
elif what == "sndtimeo":  # the target's own SO_SNDTIMEO ends the wait, and stays its own
    a, b = socket.socketpair()
    fill(a)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval(0.3))
    t = time.monotonic()
    try:
        a.sendmsg([b"y"], rights(b))
        print("sent")
    except BlockingIOError:
        print("send timeout %.2f" % (time.monotonic() - t))
    first = hold_backlog()
    s = socket.socket(socket.AF_UNIX)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval(0.3))
    t = time.monotonic()
    try:
        s.connect(path)
        print("connected")
    except BlockingIOError:
        print("connect timeout %.2f" % (time.monotonic() - t))
    print("sndtimeo", struct.unpack("ll", s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, 16)))
elif what == "wakes":  # a blocked send completes once the peer reads
    a, b = socket.socketpair()
    fill(a)
    def drain():
        time.sleep(0.3)
        b.setblocking(False)
        try:
            while True:
                b.recv(1 << 20)
        except BlockingIOError:
            pass
    threading.Thread(target=drain).start()
    print("sent", a.sendmsg([b"y"], rights(b)))
`

// peerListener names, for hang.py, a unix socket in dir (inside the
// writable roots) that the command binds itself and never accepts on
// (stream, backlog 0) or never reads (datagram): the sandbox reaches only
// the sockets it bound (a host listener there is denied).
func peerListener(dir string, typ int) string {
	kind := "dgram"
	if typ == unix.SOCK_STREAM {
		kind = "stream"
	}
	return fmt.Sprintf("own-%s:%s", kind, filepath.Join(dir, "peer-"+kind+".sock"))
}

// emulatedCase is one run of hang.py under the executor.
type emulatedCase struct {
	what     string
	listener int // 0, or the socket type of the unresponsive peer the case needs
	blocks   bool
	// want lists substrings of stdout for the cases that end by themselves.
	want []string
	// prompt lists the prefixes of lines "PREFIX SECONDS" on stdout that
	// must each say less than a second (scaled by testtime).
	prompt []string
	// rights: the case passes a descriptor with SCM_RIGHTS over a
	// socketpair, which a host without pidfd_getfd refuses (noFDCopies).
	rights bool
}

// rightsRefusal is the reason of the fact a host without pidfd_getfd
// records for a sendmsg with control data: the supervisor would need copies
// of the descriptors passed.
const rightsRefusal = "no pidfd_getfd on this host: control data, SCM_RIGHTS or SCM_CREDENTIALS, cannot be passed on for the command"

// noFDCopies says whether the simulated host refuses pidfd_getfd (Docker's
// default profile): the supervisor then replaces sockets instead of copying
// them, and refuses a sendmsg with control data with rightsRefusal.
func noFDCopies() bool { return simulatedHostFilters("pidfd_getfd") }

// requireRightsRefused checks a result whose command passed a descriptor
// with SCM_RIGHTS on a host without pidfd_getfd: it failed at once with
// EACCES, and the one fact says why.
func requireRightsRefused(t *testing.T, r *executor.RunResult) {
	t.Helper()
	if r.TimedOut || r.ExitCode == 0 || !strings.Contains(r.Stderr.Text, "PermissionError") {
		t.Errorf("timedOut=%v exit=%d stderr %q, want the sendmsg refused with EACCES", r.TimedOut, r.ExitCode, r.Stderr.Text)
	}
	if d := r.Sandbox.Denials; len(d) != 1 || d[0].Op != "send" || d[0].Syscall != "sendmsg" || d[0].Errno != "EACCES" || d[0].Reason != rightsRefusal {
		t.Errorf("denials = %+v, want one send by sendmsg, EACCES, %q", d, rightsRefusal)
	}
}

var emulatedCases = []emulatedCase{
	{what: "sendmsg-rights", blocks: true, rights: true},
	{what: "sendmmsg", listener: unix.SOCK_DGRAM, blocks: true},
	{what: "sendto-full", listener: unix.SOCK_DGRAM, blocks: true},
	{what: "connect-backlog", listener: unix.SOCK_STREAM, blocks: true},
	{what: "interrupted", want: []string{"handler\ninterrupted\n"}, rights: true},
	{what: "nonblocking", listener: unix.SOCK_STREAM, want: []string{"EAGAIN\n", "sendmmsg (-1, 11)\n", "connect EAGAIN\n"}, rights: true},
	{what: "sndtimeo", listener: unix.SOCK_STREAM, want: []string{"sndtimeo (0, 300000)\n"}, prompt: []string{"send timeout", "connect timeout"}, rights: true},
	{what: "wakes", want: []string{"sent 1\n"}, rights: true},
}

// TestSupervisorEmulatedCallsBounded: connect, sendto, sendmsg and sendmmsg,
// which the supervisor performs for the command while the network is off,
// never hold it: a call that cannot complete (a socketpair the command filled
// itself, a listener whose backlog is full, a datagram socket that never
// reads) is abandoned when the command is killed at its timeout, and
// Run returns within the timeout and the grace, with nothing left running. A
// signal interrupting such a call runs the command's handler. The target's
// own semantics hold: O_NONBLOCK and MSG_DONTWAIT give EAGAIN at once, its
// SO_SNDTIMEO ends the wait (and is still its own afterwards), and a blocked
// send completes once the peer reads.
func TestSupervisorEmulatedCallsBounded(t *testing.T) {
	t.Parallel()
	requireLandlock(t)
	// The timeout runs from the spawn: python3, starting alongside the
	// other cases' (up to eleven at once), must have reached its blocking
	// call by then. 3 s, scaled: about 1 s was too short on a loaded host
	// once slowed down (a python3 start costs ~100x a bash start).
	timeoutMs, graceMs := testtime.Ms(3000), msScaled(400)
	forEachIdentity(t, func(t *testing.T, id identity) {
		var cases []hCase
		var meta []emulatedCase
		var tags []string
		for _, mode := range confinedModes {
			for _, c := range emulatedCases {
				if c.listener != 0 && mode == "read-only" {
					continue // read-only reaches no host socket at all
				}
				cfg := id.execConfig(t, mode)
				cfg.KillGraceMs = graceMs
				id.writeOwned(t, filepath.Join(cfg.Workspace, "hang.py"), hangPy, 0o644)
				path := ""
				if c.listener != 0 {
					path = peerListener(id.mkdirOwned(t, "/tmp", "dsh-it-sock-"), c.listener)
				}
				tag := taggedNonce(t)
				req := harnessproto.Request{Command: fmt.Sprintf("exec python3 hang.py %s %q %s", c.what, path, tag), TimeoutMs: f64(testtime.Ms(20000)),
					Env: map[string]string{"PYTHONDONTWRITEBYTECODE": "1"}}
				if c.blocks {
					req.TimeoutMs = f64(timeoutMs)
				}
				cases = append(cases, hCase{name: mode + "/" + c.what, spec: harnessproto.Spec{Config: cfg, Action: "run", Request: req, SurvivorsOf: tag}})
				meta = append(meta, c)
				tags = append(tags, tag)
			}
		}
		hs := make([]*harnessProc, len(cases))
		for i, c := range cases {
			hs[i] = id.startHarness(t, c.spec, c.env...)
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				out := hs[i].wait(t, 30*time.Second)
				r := requireResult(t, out.Outcome)
				requireConfined(t, r, strings.Split(c.name, "/")[0])
				if meta[i].rights && noFDCopies() {
					requireRightsRefused(t, r)
				} else if meta[i].blocks {
					if !strings.Contains(r.Stdout.Text, "blocking") {
						t.Errorf("the command never reached its blocking call (stdout %q, stderr %q): test precondition", r.Stdout.Text, r.Stderr.Text)
					}
					if !r.TimedOut {
						t.Errorf("timedOut = false, want true (exit %d, stdout %q, stderr %q)", r.ExitCode, r.Stdout.Text, r.Stderr.Text)
					}
					// Generous for slow hosts; a supervisor that blocks holds Run for good.
					if limit := timeoutMs + float64(graceMs) + testtime.Ms(4000); out.ElapsedMs > limit {
						t.Errorf("Run returned after %.0f ms, want at most the timeout + grace (%.0f ms) + slack", out.ElapsedMs, timeoutMs+float64(graceMs))
					}
				} else {
					if r.TimedOut || r.ExitCode != 0 {
						t.Errorf("timedOut=%v exit=%d, want false 0 (stdout %q, stderr %q)", r.TimedOut, r.ExitCode, r.Stdout.Text, r.Stderr.Text)
					}
					for _, w := range meta[i].want {
						if !strings.Contains(r.Stdout.Text, w) {
							t.Errorf("stdout %q lacks %q (stderr %q)", r.Stdout.Text, w, r.Stderr.Text)
						}
					}
					for _, p := range meta[i].prompt {
						requirePromptLine(t, r.Stdout.Text, p, testtime.Scale(time.Second))
					}
					if out.ElapsedMs > testtime.Ms(10000) {
						t.Errorf("the command took %.0f ms, want a prompt end", out.ElapsedMs)
					}
				}
				if len(r.Sandbox.Denials) != 0 && !(meta[i].rights && noFDCopies()) {
					t.Errorf("unexpected denials %+v", r.Sandbox.Denials)
				}
				if len(out.Survivors) > 0 {
					t.Errorf("processes of the command still ran after its result: %q", out.Survivors)
				}
				requireNoneLeft(t, tags[i], 2*time.Second)
			})
		}
	})
}

// requireRightsRefusedCLI checks dsh-sandbox-run's report and stderr for
// the one refused sendmsg with control data (noFDCopies) of a mode's run.
func requireRightsRefusedCLI(t *testing.T, r result, mode string) {
	t.Helper()
	rep := requireReport(t, r)
	if d := rep.Denials; len(d) != 1 || d[0].Op != "send" || d[0].Syscall != "sendmsg" || d[0].Reason != rightsRefusal {
		t.Errorf("denials = %+v, want one send by sendmsg, %q", d, rightsRefusal)
	}
	if line := fmt.Sprintf("%sdenied send sendmsg (%s mode, %s)", cliPrefix, mode, rightsRefusal); !hasDenialLine(r.Stderr, line) {
		t.Errorf("stderr lacks %q: %q", line, r.Stderr)
	}
}

// TestSupervisorEmulatedCallsCLI: the reported case — dsh-sandbox-run whose
// command (under timeout(1)) blocks itself in an emulated sendmsg — ends
// with the command, and SIGTERM ends dsh-sandbox-run while such a call is
// pending. Without pidfd_getfd (noFDCopies) that sendmsg is refused at once,
// so the pending call is a sendto to a datagram socket of the command's own
// that never reads, in workspace-write; read-only has no socket to bind
// there, so no emulated call can wait, and the refusal is what is checked.
func TestSupervisorEmulatedCallsCLI(t *testing.T) {
	requireLandlock(t)
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range confinedModes {
			hang := func(ws string) []string { return []string{"python3", "hang.py", "sendmsg-rights"} }
			if noFDCopies() {
				if mode == "read-only" {
					t.Run(mode+"/refused", func(t *testing.T) {
						ws := id.workspace(t)
						id.writeOwned(t, filepath.Join(ws, "hang.py"), hangPy, 0o644)
						r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws), Argv: hang(ws), Dir: ws, Timeout: 20 * time.Second})
						requireExit(t, r, 1)
						requireRightsRefusedCLI(t, r, mode)
					})
					continue
				}
				hang = func(ws string) []string {
					return []string{"python3", "hang.py", "sendto-full", "own-dgram:" + filepath.Join(ws, "peer.sock")}
				}
			}
			t.Run(mode+"/timeout", func(t *testing.T) {
				ws := id.workspace(t)
				id.writeOwned(t, filepath.Join(ws, "hang.py"), hangPy, 0o644)
				// scaled: python3 must reach its blocking call before timeout(1) fires
				after := testtime.Scale(2 * time.Second)
				t0 := time.Now()
				r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws), Argv: append([]string{"timeout", strconv.FormatFloat(after.Seconds(), 'f', -1, 64)}, hang(ws)...),
					Dir: ws, Timeout: 20 * time.Second})
				requireExit(t, r, 124)
				if !strings.Contains(r.Stdout, "blocking") {
					t.Errorf("the command never reached its blocking call (stdout %q): test precondition", r.Stdout)
				}
				if d := time.Since(t0); d > testtime.Scale(8*time.Second) {
					t.Errorf("dsh-sandbox-run took %v for a command that timeout(1) ends after %v", d, after)
				}
			})
			t.Run(mode+"/SIGTERM", func(t *testing.T) {
				ws := id.workspace(t)
				id.writeOwned(t, filepath.Join(ws, "hang.py"), hangPy, 0o644)
				tag := taggedNonce(t)
				argv := hang(ws)
				if len(argv) == 3 {
					argv = append(argv, "")
				}
				s := id.start(t, runOpts{Flags: sandboxFlags(mode, ws), Argv: append(argv, tag), Dir: ws})
				if err := waitOutput(s, "blocking", 10*time.Second); err != nil {
					t.Fatal(err)
				}
				sigtermCLI(t, s, 143, tag)
			})
		}
	})
}

// sigtermCLI sends SIGTERM to a started dsh-sandbox-run and checks that it
// ends with exit code want within its kill grace (3 s) and some slack (8 s in
// all, scaled by testtime), and that no process carrying tag survives.
func sigtermCLI(t *testing.T, s *started, want int, tag string) {
	t.Helper()
	t0 := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := s.wait(t, 20*time.Second)
	if r.Exit != want {
		t.Errorf("exit = %d, want %d", r.Exit, want)
	}
	if d := time.Since(t0); d > testtime.Scale(8*time.Second) {
		t.Errorf("dsh-sandbox-run took %v to end after SIGTERM", d)
	}
	requireNoneLeft(t, tag, 2*time.Second)
}

// uffdPy tries to get a userfaultfd through /dev/userfaultfd (open, then
// USERFAULTFD_IOC_NEW): one could make the supervisor's reads of the
// command's memory wait forever.
const uffdPy = `import errno, fcntl, os
for mode in (os.O_RDONLY, os.O_RDWR):
    try:
        fd = os.open("/dev/userfaultfd", mode | os.O_CLOEXEC)
    except OSError as e:
        print("open", errno.errorcode[e.errno])
        continue
    try:
        u = fcntl.ioctl(fd, 0xAA00, os.O_CLOEXEC)
        print("GOT", os.readlink("/proc/self/fd/%d" % u))
    except OSError as e:
        print("ioctl", errno.errorcode[e.errno])
`

// TestSupervisorUserfaultfdDeviceDenied: the userfaultfd(2) system call is
// denied, and so is its other door, the /dev/userfaultfd ioctl (which
// Landlock's IOCTL_DEV covers only from ABI 5, and not at all without
// Landlock): a root command, which may open the root-owned device, gets
// EPERM and a denial fact.
func TestSupervisorUserfaultfdDeviceDenied(t *testing.T) {
	if _, err := os.Stat("/dev/userfaultfd"); err != nil {
		t.Skipf("no /dev/userfaultfd on this host (Linux < 6.1 or not built): %v", err)
	}
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, d := range []*degradation{nil, &degradedNoLandlock} {
			for _, mode := range confinedModes {
				name := mode
				if d != nil {
					name = d.name + "/" + mode
				}
				t.Run(name, func(t *testing.T) {
					wrap := d.prepare(t, id)
					ws := id.workspace(t)
					id.writeOwned(t, filepath.Join(ws, "uffd.py"), uffdPy, 0o644)
					r := id.run(t, runOpts{Wrap: wrap, Flags: sandboxFlags(mode, ws), Argv: []string{"python3", "uffd.py"}, Dir: ws})
					requireExit(t, r, 0)
					if strings.Contains(r.Stdout, "GOT") {
						t.Errorf("the command got a userfaultfd: %q", r.Stdout)
					}
					if id.isRoot() {
						// Device nodes are out of reach (Landlock read rules,
						// nodev mounts): the open fails; where it does not,
						// the filter denies the ioctl with a fact.
						switch {
						case r.Stdout == "open EACCES\nopen EACCES\n":
						case strings.Contains(r.Stdout, "ioctl EPERM"):
							requireDenial(t, r, mode, "ioctl", "USERFAULTFD_IOC_NEW")
						default:
							t.Errorf("stdout %q: want the open refused (EACCES) or the ioctl denied (EPERM)", r.Stdout)
						}
					} else if strings.Contains(r.Stdout, "ioctl") {
						t.Errorf("the unprivileged command could open /dev/userfaultfd: %q", r.Stdout)
					}
				})
			}
		}
	})
}

// requirePromptLine checks that out has a line "prefix SECONDS" saying less
// than limit.
func requirePromptLine(t *testing.T, out, prefix string, limit time.Duration) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, prefix+" "); ok {
			s, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Errorf("line %q: %v", l, err)
			} else if d := time.Duration(s * float64(time.Second)); d < 0 || d >= limit {
				t.Errorf("line %q: want less than %v", l, limit)
			}
			return
		}
	}
	t.Errorf("stdout %q lacks a line %q SECONDS", out, prefix)
}

// stoppedCase is one command that stops (or kills) the processes keeping
// its tree. In the scripts, $K is the keeper (the command's parent: the
// inner keeper, or the pid namespace's init, which the command cannot stop)
// and $R its parent, the relay (invisible in a pid namespace, where $R is 0).
type stoppedCase struct {
	name, script string
	timeoutMs    int
	graceMs      int
	// what the result must say
	exit     int // -1: any
	timedOut bool
	stdout   string
	// noPidNSOnly: the case needs the relay to be visible
	noPidNSOnly bool
	// failed: the runner is reported lost (RunnerFailed) — or, when the
	// command killed its keeper before the keeper could report that the
	// command started (the command runs from its execve on), Start fails
	// saying the runner exited.
	failed bool
	// confined, when set, is what a confined mode gives instead: there the
	// command cannot reach its keeper and relay (a nested Landlock domain
	// whose signal scope keeps them out, or the supervisor below ABI 6), so
	// the script's kills fail and it goes on.
	confined *stoppedCase
}

const stoppedPrelude = `K=$PPID; R=$(sed 's/.*) . \([0-9]*\) .*/\1/' /proc/$K/stat); [ "$R" = 0 ] && R=
`

// The timeouts of 3 s (scaled) give the command time to set its trap and stop
// its helpers first: on a TCG guest under the whole suite's load, 1 s once
// ran out before bash had set its trap (exit 143, no output).
var stoppedCases = []stoppedCase{
	{name: "keeper stopped, command exits", script: `kill -STOP $K; echo stopped; exit 5`,
		timeoutMs: 20000, exit: 5, stdout: "stopped\n"},
	{name: "keeper and relay stopped, timeout", script: `setsid sleep 1000${TAG}1 </dev/null >/dev/null 2>&1 & kill -STOP $R $K; echo stopped; exec sleep 1000$TAG`,
		timeoutMs: 3000, exit: -1, timedOut: true, stdout: "stopped\n"},
	{name: "keeper and relay stopped, TERM trap runs", script: `trap 'echo bye; exit 3' TERM; kill -STOP $R $K; echo stopped; while :; do sleep 0.05; done`,
		timeoutMs: 3000, graceMs: 5000, exit: 3, timedOut: true, stdout: "stopped\nbye\n"},
	{name: "command stops its own group, TERM trap runs", script: `trap 'echo bye; exit 3' TERM; echo stopped; kill -STOP 0; echo resumed`,
		timeoutMs: 3000, graceMs: 5000, exit: 3, timedOut: true, stdout: "stopped\nbye\n"},
	{name: "relay stopped, keeper killed", script: `setsid sleep 1000${TAG}1 </dev/null >/dev/null 2>&1 & kill -STOP $R; kill -KILL $K; echo alive; exec sleep 1000$TAG`,
		timeoutMs: 20000, exit: 125, failed: true, noPidNSOnly: true,
		confined: &stoppedCase{timeoutMs: 3000, exit: -1, timedOut: true, stdout: "alive\n"}},
}

// stoppedVariant is a mode on a host with or without pid namespaces.
type stoppedVariant struct {
	name, mode string
	wrap       []string
	pidNS      bool
}

func stoppedVariants(t *testing.T, id identity) []stoppedVariant {
	t.Helper()
	vs := []stoppedVariant{{"danger-full-access", "danger-full-access", nil, false}}
	for _, mode := range confinedModes {
		vs = append(vs, stoppedVariant{mode, mode, nil, true})
	}
	needHelper(t)
	requireLandlock(t)
	if err := id.userNamespacesWork(); err != nil {
		t.Logf("!!! NO-PID-NAMESPACE VARIANTS NOT TESTED: cannot simulate a host without pid namespaces: %v", err)
		return vs
	}
	for _, mode := range confinedModes {
		vs = append(vs, stoppedVariant{mode + "-no-pidns", mode, []string{degradeBin, "usernsonly"}, false})
	}
	return vs
}

// TestStoppedHelpersNeverStall: a command that stops its keeper and relay
// (SIGSTOP), kills one of them, or stops its own process group neither
// stalls Run — it returns when the command ends, or by the timeout plus the
// grace — nor leaves a process behind, in every mode, with and without a
// pid namespace. A stopped command's TERM trap still runs on timeout.
func TestStoppedHelpersNeverStall(t *testing.T) {
	t.Parallel()
	forEachIdentity(t, func(t *testing.T, id identity) {
		type run struct {
			name string
			c    stoppedCase
			tag  string
			h    *harnessProc
		}
		var runs []run
		for _, v := range stoppedVariants(t, id) {
			for _, c := range stoppedCases {
				if c.noPidNSOnly && v.pidNS {
					continue
				}
				if c.confined != nil && v.mode != "danger-full-access" {
					cc := *c.confined
					cc.name, cc.script, cc.noPidNSOnly = c.name, c.script, c.noPidNSOnly
					c = cc
				}
				tag := taggedNonce(t)
				// Scaled: the command must have stopped its helpers by the
				// timeout, and its trap must run within the grace.
				cfg := id.execConfig(t, v.mode)
				cfg.KillGraceMs = msScaled(400)
				if c.graceMs != 0 {
					cfg.KillGraceMs = msScaled(c.graceMs)
				}
				spec := harnessproto.Spec{Config: cfg, Action: "run", SurvivorsOf: tag, Request: harnessproto.Request{
					Command: stoppedPrelude + c.script, TimeoutMs: f64(testtime.Ms(float64(c.timeoutMs))), Env: map[string]string{"TAG": tag}}}
				runs = append(runs, run{name: v.name + "/" + c.name, c: c, tag: tag, h: id.startHarnessWrapped(t, v.wrap, spec)})
			}
		}
		for _, rn := range runs {
			t.Run(rn.name, func(t *testing.T) {
				c := rn.c
				limit := testtime.Ms(10000)
				if c.timedOut {
					limit = testtime.Ms(float64(c.timeoutMs + 400 + 4000))
				}
				out := rn.h.wait(t, time.Duration(limit)*time.Millisecond+10*time.Second) // (wait scales it)
				if out.ElapsedMs > limit {
					t.Errorf("Run returned after %.0f ms, want at most %.0f", out.ElapsedMs, limit)
				}
				if len(out.Survivors) > 0 {
					t.Errorf("processes still ran after the result: %q", out.Survivors)
				}
				requireNoneLeft(t, rn.tag, 2*time.Second)
				if c.failed && out.Error != nil && strings.Contains(out.Error.Text, "the sandbox runner exited before the command started") {
					t.Logf("the keeper was killed before it reported the start: %s", out.Error.Text)
					return
				}
				r := requireResult(t, out.Outcome)
				if !strings.HasPrefix(r.Stdout.Text, c.stdout) {
					t.Errorf("stdout = %q, want it to start with %q (stderr %q)", r.Stdout.Text, c.stdout, r.Stderr.Text)
				}
				if c.exit >= 0 && r.ExitCode != c.exit {
					t.Errorf("exit = %d, want %d (signal %q, runner failure %q)", r.ExitCode, c.exit, r.Signal, r.Sandbox.RunnerFailure)
				}
				if r.TimedOut != c.timedOut {
					t.Errorf("timedOut = %v, want %v", r.TimedOut, c.timedOut)
				}
				if r.Sandbox.RunnerFailed != c.failed {
					t.Errorf("runnerFailed = %v (%q), want %v", r.Sandbox.RunnerFailed, r.Sandbox.RunnerFailure, c.failed)
				}
			})
		}
	})
}

// TestRunnerOwnProcessGroup: the runner's relay and keeper lead a process
// group of their own, never the caller's. Without a pid namespace the
// command can stop them (danger-full-access), and the kernel sends SIGHUP
// and SIGCONT to a group holding a stopped process once it is orphaned: a
// keeper whose relay died first exits with a parent outside the group
// (init), which in the caller's group — already orphaned where the
// caller's parent is init, as in a container or the VM guest — ended the
// caller (the 6.1 guest's test binary, exit 129).
func TestRunnerOwnProcessGroup(t *testing.T) {
	t.Parallel()
	forEachIdentity(t, func(t *testing.T, id identity) {
		stat := func(v string) string {
			return `$(sed 's/.*) . \([0-9]*\) \([0-9]*\) .*/\1 \2/' /proc/` + v + `/stat)`
		}
		// The keeper is the command's parent, the relay the keeper's; each
		// line: ppid pgrp.
		script := `K=$PPID; set -- ` + stat("$K") + `; R=$1; echo "keeper $K $1 $2"; set -- ` + stat("$R") + `; echo "relay $R $1 $2"`
		spec := harnessproto.Spec{Config: id.execConfig(t, "danger-full-access"), Action: "run", Request: harnessproto.Request{Command: script}}
		out := id.startHarness(t, spec).wait(t, 30*time.Second)
		r := requireResult(t, out.Outcome)
		var keeper, keeperParent, keeperGroup, relay, relayParent, relayGroup int
		if _, err := fmt.Sscanf(r.Stdout.Text, "keeper %d %d %d\nrelay %d %d %d\n", &keeper, &keeperParent, &keeperGroup, &relay, &relayParent, &relayGroup); err != nil {
			t.Fatalf("stdout %q (stderr %q): %v", r.Stdout.Text, r.Stderr.Text, err)
		}
		if keeperParent != relay {
			t.Fatalf("the keeper's parent is %d, the relay is %d: stdout %q", keeperParent, relay, r.Stdout.Text)
		}
		if relayGroup != relay || keeperGroup != relay {
			t.Errorf("relay %d in group %d, keeper in group %d: want both in the relay's own group", relay, relayGroup, keeperGroup)
		}
		// The harness's group is the test's: the caller's group.
		if g := syscall.Getpgrp(); relayGroup == g || keeperGroup == g {
			t.Errorf("the runner's processes are in the caller's process group %d", g)
		}
	})
}

// TestStoppedHelpersCLI: the reported case — dsh-sandbox-run whose command
// stops its keeper — ends when the command ends, and on SIGTERM within the
// CLI's kill grace, leaving nothing behind, in every mode, with and without
// a pid namespace.
func TestStoppedHelpersCLI(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, v := range stoppedVariants(t, id) {
			t.Run(v.name+"/exits", func(t *testing.T) {
				ws := id.workspace(t)
				tag := taggedNonce(t)
				t0 := time.Now()
				r := id.run(t, runOpts{Wrap: v.wrap, Flags: sandboxFlags(v.mode, ws), Dir: ws, Env: []string{"TAG=" + tag},
					Argv: bash(stoppedPrelude + `setsid sleep 1000$TAG </dev/null >/dev/null 2>&1 & kill -STOP $R $K; exit 5`), Timeout: 20 * time.Second})
				requireExit(t, r, 5)
				if d := time.Since(t0); d > testtime.Scale(8*time.Second) {
					t.Errorf("dsh-sandbox-run took %v", d)
				}
				requireNoneLeft(t, tag, 2*time.Second)
			})
			t.Run(v.name+"/SIGTERM", func(t *testing.T) {
				ws := id.workspace(t)
				tag := taggedNonce(t)
				s := id.start(t, runOpts{Wrap: v.wrap, Flags: sandboxFlags(v.mode, ws), Dir: ws, Env: []string{"TAG=" + tag},
					Argv: bash(stoppedPrelude + `trap '' TERM; setsid sleep 1000$TAG </dev/null >/dev/null 2>&1 & kill -STOP $R $K; echo ready; sleep 1000$TAG`)})
				if err := waitOutput(s, "ready", 10*time.Second); err != nil {
					t.Fatal(err)
				}
				if err := pollCond(5*time.Second, func() bool { return len(procsWithCmdline("sleep", "1000"+tag)) == 2 }); err != nil {
					t.Fatalf("the sleeps never ran: %q", procscan.WithCmdline(tag))
				}
				// The command ignores SIGTERM: killed after the grace.
				sigtermCLI(t, s, 137, tag)
			})
		}
	})
}
