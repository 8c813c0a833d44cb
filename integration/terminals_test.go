//go:build linux

package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

// hostConfig is one host configuration the suite simulates: the full host
// (nil degradation) or one of the degraded ones.
type hostConfig struct {
	name string
	d    *degradation
}

func (h hostConfig) wrap() []string {
	if h.d == nil {
		return nil
	}
	return h.d.wrap()
}

// mountView says whether the sandbox gets a mount view on this configuration.
func (h hostConfig) mountView() bool {
	return !h.d.lacks("mount-view")
}

// onHost is the configuration the commands run on: under DSH_IT_HOST the
// full host is the simulated one.
func (h hostConfig) onHost() hostConfig {
	if h.d != nil {
		return h
	}
	if d := simulated(); d != nil {
		return hostConfig{d.name + " (DSH_IT_HOST)", d}
	}
	return h
}

var hostConfigs = []hostConfig{
	{"full host", nil},
	{"no Landlock", &degradedNoLandlock},
	{"no user namespaces", &degradedNoUserNS},
	{"user namespace only", &degradedUserNSOnly},
}

// supervisedHosts are the host configurations with a supervisor, the full
// host first, for what only the supervisor decides without a namespace or a
// mount view (set-ID bits, System V IPC, the runner's processes).
var supervisedHosts = []hostConfig{
	{"full host", nil},
	{"no user namespaces", &degradedNoUserNS},
	{"Ubuntu 24.04 AppArmor", &degradedAppArmor},
	{"docker seccomp profile", &degradedDocker},
}

// forEachHost runs f for every host configuration and identity.
func forEachHost(t *testing.T, f func(t *testing.T, h hostConfig, id identity)) {
	forEachHostOf(t, hostConfigs, f)
}

// forEachHostOf runs f for each of the host configurations and every identity.
// Under DSH_IT_HOST the full host is the simulated one, run once.
func forEachHostOf(t *testing.T, hosts []hostConfig, f func(t *testing.T, h hostConfig, id identity)) {
	seen := map[*degradation]bool{}
	for _, h := range hosts {
		h = h.onHost()
		if h.d != nil && seen[h.d] {
			t.Logf("%s: run once, as the simulated host", h.d.name)
			continue
		}
		seen[h.d] = true
		t.Run(h.name, func(t *testing.T) {
			forEachIdentity(t, func(t *testing.T, id identity) {
				if h.d == nil {
					requireLandlock(t)
				} else {
					h.d.need(t, id)
				}
				f(t, h, id)
			})
		})
	}
}

// hostPty is a pty pair of the test process, outside the sandbox: another
// terminal of the identity (its slave is chowned to it). The slave is raw
// (no echo, no line buffering), so what the master writes waits in the
// slave's input queue as typed keystrokes would.
type hostPty struct {
	master, slave int
	name          string
}

func newHostPty(t *testing.T, id identity) *hostPty {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	p := &hostPty{master: m, slave: -1}
	t.Cleanup(p.close)
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(m, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	p.name = fmt.Sprintf("/dev/pts/%d", n)
	if p.slave, err = unix.Open(p.name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0); err != nil {
		t.Fatalf("open %s: %v", p.name, err)
	}
	tio, err := unix.IoctlGetTermios(p.slave, unix.TCGETS)
	if err != nil {
		t.Fatalf("tcgetattr: %v", err)
	}
	tio.Lflag &^= unix.ECHO | unix.ICANON | unix.ISIG | unix.IEXTEN
	tio.Oflag &^= unix.OPOST
	tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(p.slave, unix.TCSETS, tio); err != nil {
		t.Fatalf("tcsetattr: %v", err)
	}
	if err := os.Chown(p.name, int(id.uid), -1); err != nil {
		t.Fatalf("chown %s: %v", p.name, err)
	}
	return p
}

func (p *hostPty) close() {
	for _, fd := range []int{p.slave, p.master} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	p.slave, p.master = -1, -1
}

// type_ writes s on the master (keystrokes) and waits until the slave can
// read it.
func (p *hostPty) type_(t *testing.T, s string) {
	t.Helper()
	if _, err := unix.Write(p.master, []byte(s)); err != nil {
		t.Fatalf("write master: %v", err)
	}
	fds := []unix.PollFd{{Fd: int32(p.slave), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, int(testtime.Ms(10000))); err != nil || n != 1 {
		t.Fatalf("the typed input never reached the slave: %d %v", n, err)
	}
}

// readUntil reads fd until sentinel arrives and returns what came before it.
// The pty delivers in order, so a sentinel written after everything else
// marks the end without any sleep.
func readUntil(t *testing.T, fd int, sentinel string) string {
	t.Helper()
	var got []byte
	deadline := time.Now().Add(testtime.Scale(10 * time.Second))
	buf := make([]byte, 4096)
	for !bytes.Contains(got, []byte(sentinel)) {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("sentinel %q never arrived; got %q", sentinel, got)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, int(left/time.Millisecond)+1); err != nil && err != unix.EINTR {
			t.Fatalf("poll: %v", err)
		} else if n <= 0 {
			continue
		}
		n, err := unix.Read(fd, buf)
		if n > 0 {
			got = append(got, buf[:n]...)
		} else if err != nil && err != unix.EAGAIN && err != unix.EINTR {
			t.Fatalf("read: %v (got %q)", err, got)
		}
	}
	return string(got[:bytes.Index(got, []byte(sentinel))])
}

// otherTerminalProbe tries, from inside the sandbox, to read and write the
// pty named by argv[1] (writing argv[2]) and to open each further argument
// for reading; it prints one line per attempt.
const otherTerminalProbe = `
import os, sys
p = sys.argv[1]
try:
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        print("LEAK read", os.read(fd, 100))
    except BlockingIOError:
        print("LEAK opened-for-read")
except OSError as e:
    print("denied read", p, e.errno)
try:
    fd = os.open(p, os.O_WRONLY | os.O_NOCTTY)
    os.write(fd, sys.argv[2].encode())
    print("LEAK wrote")
except OSError as e:
    print("denied write", p, e.errno)
for d in sys.argv[3:]:
    try:
        os.close(os.open(d, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY))
        print("LEAK opened", d)
    except OSError as e:
        print("denied open", d, e.errno)
`

// hostTerminalDevices are the host's terminal and console devices that exist
// here (the probe only opens them, non-blocking, and reads nothing).
func hostTerminalDevices() []string {
	var out []string
	for _, d := range []string{"/dev/console", "/dev/tty0", "/dev/tty1", "/dev/tty2", "/dev/ttyS0", "/dev/vcs", "/dev/vcs1",
		"/dev/vcsa", "/dev/vcsa1", "/dev/vcsu", "/dev/input/event0", "/dev/input/mice", "/dev/hidraw0"} {
		if exists(d) {
			out = append(out, d)
		}
	}
	return out
}

// TestOtherTerminalsUnreachable: a pty of the same user outside the sandbox
// (a host terminal with keystrokes waiting) can be neither read nor written
// from any confined mode on any host configuration, and the host's consoles
// and virtual terminals cannot be opened; the keystrokes are still there for
// their terminal afterwards, and nothing the command wrote reached it.
func TestOtherTerminalsUnreachable(t *testing.T) {
	forEachHost(t, func(t *testing.T, h hostConfig, id identity) {
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				p := newHostPty(t, id)
				keys, injected := "keys-"+nonce(), "injected-"+nonce()
				p.type_(t, keys)
				ws := id.workspace(t)
				args := append([]string{"python3", "-c", otherTerminalProbe, p.name, injected}, hostTerminalDevices()...)
				r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags(mode, ws), Argv: args, Dir: ws})
				requireExit(t, r, 0)
				if strings.Contains(r.Stdout, "LEAK") || strings.Contains(r.Stdout, keys) {
					t.Errorf("the sandbox reached another terminal:\n%s", r.Stdout)
				}
				if !strings.Contains(r.Stdout, "denied read "+p.name) || !strings.Contains(r.Stdout, "denied write "+p.name) {
					t.Errorf("the probe did not run to the end:\n%s", r.Stdout)
				}
				// The world afterwards: the keystrokes wait for their
				// terminal, and the terminal shows nothing of the command.
				end := "end-" + nonce()
				if _, err := unix.Write(p.master, []byte(end)); err != nil {
					t.Fatal(err)
				}
				if got := readUntil(t, p.slave, end); got != keys {
					t.Errorf("the terminal's pending input is %q, want %q (consumed by the sandbox?)", got, keys)
				}
				if _, err := unix.Write(p.slave, []byte(end)); err != nil {
					t.Fatal(err)
				}
				if got := readUntil(t, p.master, end); got != "" {
					t.Errorf("the terminal received %q from the sandbox", got)
				}
				if !h.mountView() {
					// The host's /dev/pts is what the command sees: the
					// supervisor reports the write (reads are not notified;
					// Landlock denies them without a fact).
					requireDenial(t, r, mode, "write", p.name)
				}
			})
		}
	})
}

// TestOwnPtyWorks: with a mount view the command gets a devpts instance of
// its own and can allocate ptys (script, expect, python's pty); without one
// (Landlock only) the slave of a new pty is another terminal of the host's
// devpts, and opening it is denied.
func TestOwnPtyWorks(t *testing.T) {
	forEachHost(t, func(t *testing.T, h hostConfig, id identity) {
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				ws := id.workspace(t)
				if h.mountView() {
					r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags(mode, ws), Dir: ws,
						Argv: []string{"python3", "-c", `import pty,os; m,s=pty.openpty(); os.write(s,b"x"); print(os.read(m,1))`}})
					requireExit(t, r, 0)
					if strings.TrimSpace(r.Stdout) != "b'x'" {
						t.Errorf("own pty: stdout = %q, want b'x'", r.Stdout)
					}
					requireNoDenials(t, r)
					return
				}
				r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags(mode, ws), Dir: ws,
					Argv: []string{"python3", "-c", `import os
try:
    os.openpty(); print("LEAK opened a pty of the host's devpts")
except PermissionError:
    print("denied")`}})
				requireExit(t, r, 0)
				if strings.TrimSpace(r.Stdout) != "denied" {
					t.Errorf("own pty without a mount view: stdout = %q, want denied", r.Stdout)
				}
			})
		}
	})
}

// TestOwnTerminalAsFds: the caller's terminal, given as fds 0, 1 and 2,
// stays the command's: it reads its input and writes its output there.
func TestOwnTerminalAsFds(t *testing.T) {
	forEachHost(t, func(t *testing.T, h hostConfig, id identity) {
		p := newHostPty(t, id)
		in := "in-" + nonce()
		p.type_(t, in+"\n")
		sfd, err := unix.Dup(p.slave)
		if err != nil {
			t.Fatal(err)
		}
		slave := os.NewFile(uintptr(sfd), p.name)
		defer slave.Close()
		if err := unix.SetNonblock(sfd, false); err != nil {
			t.Fatal(err)
		}
		ws := id.workspace(t)
		args := append(append([]string{}, h.wrap()...), cliPath)
		args = append(args, sandboxFlags("read-only", ws)...)
		args = append(args, "--", "bash", "-c", `read -r line; echo "got-$line"`)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env, cmd.Dir, cmd.SysProcAttr = id.env(), ws, id.sysProcAttr()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the command failed: %v", err)
			}
		case <-time.After(testtime.Scale(30 * time.Second)):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("the command did not finish")
		}
		end := "end-" + nonce()
		if _, err := unix.Write(p.slave, []byte(end)); err != nil {
			t.Fatal(err)
		}
		if got := readUntil(t, p.master, end); !strings.Contains(got, "got-"+in) {
			t.Errorf("the command's terminal shows %q, want got-%s", got, in)
		}
	})
}
