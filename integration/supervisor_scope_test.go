//go:build linux

package integration

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

// hostSocketDir is a directory under /tmp (a writable root) owned by the
// identity, like ssh-agent's /tmp/ssh-XXXX.
func hostSocketDir(t *testing.T, id identity) string {
	t.Helper()
	return id.mkdirOwned(t, "/tmp", "ssh-dshit")
}

// TestHostSocketInWritableRootDenied: a unix listener of the host that was
// in a writable root before the command started (an ssh-agent socket under
// /tmp, a listener in the workspace) is not the command's: connecting to
// it — by its name, through a hard link or a symlink the command made —
// and sending datagrams to a host datagram socket there are denied with a
// fact, and the host saw nothing. The command's own sockets keep working,
// also through a hard link, and so do datagrams between its own sockets.
func TestHostSocketInWritableRootDenied(t *testing.T) {
	t.Parallel()
	forEachHost(t, func(t *testing.T, h hostConfig, id identity) {
		const mode = "workspace-write"
		for _, c := range []struct{ name, via string }{
			{"agent socket under /tmp", ""},
			{"listener in the workspace", "workspace"},
			{"hard link made by the command", "link"},
			{"symlink made by the command", "symlink"},
		} {
			t.Run(c.name, func(t *testing.T) {
				ws := id.workspace(t)
				dir := hostSocketDir(t, id)
				if c.via == "workspace" {
					dir = ws
				}
				sock := filepath.Join(dir, "agent.sock")
				l := unixListener(t, sock, false)
				// the identity's own agent socket (protected_hardlinks lets
				// it link only its own files)
				if err := os.Lchown(sock, int(id.uid), int(id.gid)); err != nil && id.isRoot() {
					t.Fatal(err)
				}
				target := sock
				pre := ""
				switch c.via {
				case "link":
					target = filepath.Join(ws, "mine.sock")
					pre = fmt.Sprintf(`ln %q %q || exit 3; `, sock, target)
				case "symlink":
					target = filepath.Join(ws, "mine.sock")
					pre = fmt.Sprintf(`ln -s %q %q || exit 3; `, sock, target)
				}
				script := pre + strings.Replace(l.script, strconv.Quote(sock), strconv.Quote(target), 1)
				r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags(mode, ws), Argv: bash(script), Dir: ws})
				requireFailed(t, r)
				if r.Exit == 3 {
					t.Fatalf("the command could not make its link: %v", r)
				}
				if l.saw(queuedWait) {
					t.Errorf("the host listener got a connection from the sandbox")
				}
				want := sock
				if c.via == "link" {
					want = target // a hard link: the name the command used
				}
				requireDenial(t, r, mode, "connect", want)
			})
		}
		t.Run("datagram to a host socket under /tmp", func(t *testing.T) {
			ws := id.workspace(t)
			sock := filepath.Join(hostSocketDir(t, id), "log.sock")
			pc, err := net.ListenPacket("unixgram", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			if err := os.Chmod(sock, 0o777); err != nil {
				t.Fatal(err)
			}
			py := fmt.Sprintf(`import socket; s=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto(b"hi", %q)`, sock)
			r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags(mode, ws), Argv: []string{"python3", "-c", py}, Dir: ws})
			requireFailed(t, r)
			_ = pc.SetReadDeadline(time.Now().Add(queuedWait))
			if n, _, err := pc.ReadFrom(make([]byte, 16)); err == nil {
				t.Errorf("the host datagram socket received %d bytes", n)
			}
			requireDenial(t, r, mode, "send", sock)
		})
		t.Run("own sockets still work", func(t *testing.T) {
			ws := id.workspace(t)
			script := `python3 - <<'EOF'
import os, socket
p = os.path.join(os.getcwd(), "own.sock")
srv = socket.socket(socket.AF_UNIX); srv.bind(p); srv.listen(2)
os.link(p, p + ".lnk")
for name in (p, p + ".lnk", "own.sock"):
    cli = socket.socket(socket.AF_UNIX); cli.connect(name); cli.send(b"ping")
    conn, _ = srv.accept(); print(conn.recv(4).decode())
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); d.bind("d.sock")
c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); c.bind("c.sock")
c.sendto(b"dgram", "d.sock"); print(d.recvfrom(16)[0].decode())
print(oct(os.stat(p).st_mode & 0o777))
EOF`
			if noFDCopies() {
				// A bound datagram socket cannot send there
				// (TestDockerSocketDenials): an unbound one does.
				script = strings.Replace(script, `c.bind("c.sock")`, "pass", 1)
			}
			r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags(mode, ws), Argv: bash("umask 027; " + script), Dir: ws})
			requireExit(t, r, 0)
			if got := strings.Join(strings.Fields(r.Stdout), " "); got != "ping ping ping dgram 0o750" {
				t.Errorf("stdout = %q, want ping ×3, dgram and the command's umask on its socket (0o750)", r.Stdout)
			}
			requireNoDenials(t, r)
			st, err := os.Stat(filepath.Join(ws, "own.sock"))
			if err != nil {
				t.Fatal(err)
			}
			if sys := st.Sys().(*syscall.Stat_t); sys.Uid != id.uid || sys.Gid != id.gid {
				t.Errorf("own.sock is owned by %d:%d, want the identity's %d:%d", sys.Uid, sys.Gid, id.uid, id.gid)
			}
		})
		t.Run("bind outside the roots denied", func(t *testing.T) {
			ws, out := id.workspace(t), id.outside(t)
			py := fmt.Sprintf(`import socket; socket.socket(socket.AF_UNIX).bind(%q)`, filepath.Join(out, "x.sock"))
			r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags(mode, ws), Argv: []string{"python3", "-c", py}, Dir: ws})
			requireFailed(t, r)
			requireAbsent(t, filepath.Join(out, "x.sock"))
			requireDenial(t, r, mode, "bind", filepath.Join(out, "x.sock"))
		})
	})
}

// TestAbstractSocketSquatting: where the command shares the host's network
// namespace (--network, a host without user namespaces, a user namespace
// only), binding an abstract name is denied with a fact, and a host client
// that then dials the name finds nothing. With a network namespace of its
// own the name is the sandbox's: the bind works, and the host still finds
// nothing. Autobind (a kernel-chosen name) works everywhere.
func TestAbstractSocketSquatting(t *testing.T) {
	forEachHost(t, func(t *testing.T, h hostConfig, id identity) {
		for _, network := range []bool{false, true} {
			t.Run(fmt.Sprintf("network=%v", network), func(t *testing.T) {
				ws := id.workspace(t)
				name := "dsh-it-squat-" + nonce()
				ready, release := filepath.Join(ws, "ready"), filepath.Join(ws, "release")
				for _, f := range []string{ready, release} {
					if err := unix.Mkfifo(f, 0o600); err != nil {
						t.Fatal(err)
					}
					if err := os.Chown(f, int(id.uid), int(id.gid)); err != nil && id.isRoot() {
						t.Fatal(err)
					}
				}
				py := fmt.Sprintf(`
import socket
a = socket.socket(socket.AF_UNIX); a.bind(b""); auto = a.getsockname()
s = socket.socket(socket.AF_UNIX)
try:
    s.bind(b"\0%s"); s.listen(1); res = "bound"
except OSError as e:
    res = "denied %%d" %% e.errno
print(res, "autobind" if auto and auto[0:1] == b"\0" else "no-autobind", flush=True)
open("ready", "w").write(res)
open("release").read()
`, name)
				flags := sandboxFlags("workspace-write", ws)
				if network {
					flags = append(flags, "--network")
				}
				s := id.start(t, runOpts{Wrap: h.wrap(), Flags: flags, Argv: []string{"python3", "-c", py}, Dir: ws})
				got := make(chan string, 1)
				go func() {
					b, _ := os.ReadFile(ready) // blocks until the command opens it
					got <- string(b)
				}()
				var res string
				select {
				case res = <-got:
				case <-time.After(testtime.Scale(20 * time.Second)):
					t.Fatalf("the command never reported its bind")
				}
				c, dialErr := net.Dial("unix", "@"+name)
				if dialErr == nil {
					c.Close()
				}
				if err := os.WriteFile(release, []byte("x"), 0); err != nil {
					t.Fatal(err)
				}
				r := s.wait(t, 0)
				requireExit(t, r, 0)
				if dialErr == nil {
					t.Errorf("a host client connected to the abstract name the command bound (%s)", res)
				}
				if !strings.Contains(r.Stdout, " autobind") {
					t.Errorf("autobind failed: stdout %q", r.Stdout)
				}
				rep := requireReport(t, r)
				if contains(rep.Enforcement.Layers, "net-namespace") {
					if res != "bound" {
						t.Errorf("in its own network namespace the bind = %q, want bound", res)
					}
					requireNoDenials(t, r)
					return
				}
				if res != "denied 1" {
					t.Errorf("sharing the host's network namespace, the bind = %q, want denied 1 (EPERM)", res)
				}
				requireDenial(t, r, "workspace-write", "bind", "@"+name)
			})
		}
	})
}

// schedState is what a host process's scheduling looks like from outside.
type schedState struct {
	nice     string
	affinity string
	nofile   string
	ioprio   uintptr
}

func readSched(t *testing.T, pid int) schedState {
	t.Helper()
	var s schedState
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	s.nice = f[16]
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 64; i++ {
		if set.IsSet(i) {
			s.affinity += strconv.Itoa(i) + ","
		}
	}
	lim, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid)) // prlimit may need CAP_SYS_RESOURCE
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(lim), "\n") {
		if strings.HasPrefix(l, "Max open files") {
			s.nofile = strings.Join(strings.Fields(l), " ")
		}
	}
	if s.nofile == "" {
		t.Fatalf("no open files limit in /proc/%d/limits", pid)
	}
	r, _, e := unix.Syscall(unix.SYS_IOPRIO_GET, 1 /* IOPRIO_WHO_PROCESS */, uintptr(pid), 0)
	if e != 0 {
		t.Fatal(e)
	}
	s.ioprio = r
	return s
}

// TestHostProcessSchedulingDenied: a host process of the same user (the
// test's own sleep, in a process group of its own) keeps its nice value,
// affinity, rlimits and I/O priority whatever the command tries — renice of
// the pid, of its process group and (unprivileged identity) of the whole
// user, taskset, prlimit, ionice — and without a pid namespace each attempt
// is a denial fact. The command's own processes can still be reniced,
// pinned and limited.
func TestHostProcessSchedulingDenied(t *testing.T) {
	forEachHost(t, func(t *testing.T, h hostConfig, id identity) {
		if runtime := cpuCount(); runtime < 2 {
			t.Skip("taskset needs two CPUs")
		}
		sleep := exec.Command("sleep", "1000")
		sleep.SysProcAttr = id.sysProcAttr()
		sleep.SysProcAttr.Setpgid = true
		if err := sleep.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sleep.Process.Kill(); _, _ = sleep.Process.Wait() })
		pid := sleep.Process.Pid
		before := readSched(t, pid)
		userCase := ""
		if !id.isRoot() {
			// PRIO_USER of the identity: every process of that user (as
			// root this would renice the whole host, so only unprivileged).
			userCase = fmt.Sprintf(`python3 -c 'import os; os.setpriority(os.PRIO_USER, %d, 7)' 2>/dev/null && echo USER
`, id.uid)
		}
		script := fmt.Sprintf(`p=%d
renice -n 9 -p $p >/dev/null 2>&1 && echo RENICE
renice -n 9 -g $p >/dev/null 2>&1 && echo RENICE_PGRP
taskset -p 1 $p >/dev/null 2>&1 && echo TASKSET
prlimit --pid $p --nofile=64:64 >/dev/null 2>&1 && echo PRLIMIT
ionice -c 3 -p $p >/dev/null 2>&1 && echo IONICE
python3 -c 'import os; os.sched_setscheduler(%d, os.SCHED_IDLE, os.sched_param(0))' 2>/dev/null && echo SCHED
sleep 100 & c=$!
renice -n 3 -p $c >/dev/null && taskset -p 1 $c >/dev/null && prlimit --pid $c --nofile=64:64 && ionice -c 3 -p $c && taskset -p 1 $$ >/dev/null && prlimit --pid $$ --nofile=128:128 && nice -n 2 true && echo OWN_OK
kill $c
%strue
`, pid, pid, userCase)
		ws := id.workspace(t)
		r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags("workspace-write", ws), Argv: bash(script), Dir: ws})
		requireExit(t, r, 0)
		rep := requireReport(t, r)
		pidNS := contains(rep.Enforcement.Layers, "pid-namespace")
		want := "OWN_OK"
		if pidNS && userCase != "" {
			want += " USER" // PRIO_USER reaches only the namespace's processes
		}
		if got := strings.Join(strings.Fields(r.Stdout), " "); got != want {
			t.Errorf("stdout = %q, want %q (every call on the host process failed, every call on its own succeeded)", r.Stdout, want)
		}
		if after := readSched(t, pid); after != before {
			t.Errorf("the host process changed: before %+v, after %+v", before, after)
		}
		if pidNS {
			return // the host pid does not exist in the sandbox: ESRCH
		}
		requireDenial(t, r, "workspace-write", "sched", "pid "+strconv.Itoa(pid))
		requireDenial(t, r, "workspace-write", "sched", "pgrp "+strconv.Itoa(pid))
		if !id.isRoot() {
			requireDenial(t, r, "workspace-write", "sched", "user "+strconv.Itoa(int(id.uid)))
		}
	})
}

func cpuCount() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0
	}
	return set.Count()
}
