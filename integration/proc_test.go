//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

// hostProcess is a `sleep` started by the test as the identity, outside any
// sandbox, with a secret in its environment.
type hostProcess struct {
	cmd    *exec.Cmd
	pid    int
	secret string
	arg    string
	exited chan struct{}
}

func (id identity) startHostProcess(t *testing.T) *hostProcess {
	t.Helper()
	return id.startHost(t, false)
}

// startHost starts the host process, as the leader of a process group of
// its own when group.
func (id identity) startHost(t *testing.T, group bool) *hostProcess {
	t.Helper()
	arg := uniqueSleep(t)
	h := &hostProcess{secret: "DSH_IT_SECRET_" + nonce(), arg: arg, exited: make(chan struct{})}
	cmd := exec.Command("sleep", arg)
	cmd.Env = id.env("DSH_SECRET=" + h.secret)
	cmd.Dir = "/"
	cmd.SysProcAttr = id.sysProcAttr()
	cmd.SysProcAttr.Setpgid = group
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.cmd, h.pid = cmd, cmd.Process.Pid
	go func() { _ = cmd.Wait(); close(h.exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-h.exited })
	return h
}

// requireUntouched: still running, not stopped, not traced.
func (h *hostProcess) requireUntouched(t *testing.T) {
	t.Helper()
	select {
	case <-h.exited:
		t.Errorf("host process %d died: %v", h.pid, h.cmd.ProcessState)
		return
	case <-time.After(testtime.Scale(100 * time.Millisecond)): // longer: a stronger check
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.pid))
	if err != nil {
		t.Errorf("host process status: %v", err)
		return
	}
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "TracerPid:") && strings.TrimSpace(strings.TrimPrefix(l, "TracerPid:")) != "0" {
			t.Errorf("host process is being traced: %s", l)
		}
		if strings.HasPrefix(l, "State:") && (strings.Contains(l, "stopped") || strings.Contains(l, "tracing")) {
			t.Errorf("host process state: %s", l)
		}
	}
}

const ptraceScript = `python3 - "$PID" <<'EOF'
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
r = libc.ptrace(16, int(sys.argv[1]), None, None)  # PTRACE_ATTACH
print("ptrace", r, ctypes.get_errno())
if r == 0:
    import os, time
    time.sleep(0.2)
    libc.ptrace(17, int(sys.argv[1]), None, None)  # PTRACE_DETACH
    sys.exit(0)
sys.exit(1)
EOF`

// TestHostProcessesUnreachable: a process of the same identity outside the
// sandbox cannot be signalled, ptraced or have its environ read.
func TestHostProcessesUnreachable(t *testing.T) {
	t.Parallel()
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				for _, c := range []struct {
					name, script string
					op           string
				}{
					{"kill", `kill -TERM "$PID"`, ""},
					{"kill -9", `kill -KILL "$PID"`, ""},
					{"kill -STOP", `kill -STOP "$PID"`, ""},
					{"ptrace attach", ptraceScript, "ptrace"},
					{"read /proc/PID/environ", `cat "/proc/$PID/environ"`, ""},
					{"read /proc/PID/cmdline", `cat "/proc/$PID/cmdline"`, ""},
				} {
					t.Run(c.name, func(t *testing.T) {
						h := id.startHostProcess(t)
						ws := id.workspace(t)
						r := id.run(t, runOpts{
							Flags: sandboxFlags(mode, ws),
							Argv:  bash("set -o pipefail; " + c.script),
							Env:   []string{"PID=" + fmt.Sprint(h.pid)},
							Dir:   ws,
						})
						if c.name == "read /proc/PID/cmdline" && simulatedHostLacks("pid-namespace") {
							// No pid namespace: host processes are visible, their
							// command lines included — reported missing
							// (process-visibility); nothing more is reachable.
							requireExit(t, r, 0)
							if !strings.Contains(r.Stdout, h.arg) {
								t.Errorf("%s: the host process's cmdline is not visible: %q", simulatedHostName(), r.Stdout)
							}
							if rep := requireReport(t, r); !contains(rep.Enforcement.Missing, "process-visibility") {
								t.Errorf("%s: the host's processes are visible, but missing = %v lacks process-visibility", simulatedHostName(), rep.Enforcement.Missing)
							}
							h.requireUntouched(t)
							return
						}
						requireFailed(t, r)
						h.requireUntouched(t)
						if strings.Contains(r.Stdout+r.Stderr, h.secret) {
							t.Errorf("the host process's environment leaked into the sandbox output")
						}
						if strings.Contains(r.Stdout, h.arg) {
							t.Errorf("the host process's cmdline leaked into the sandbox output")
						}
						if c.op != "" {
							requireSyscallDenial(t, r, mode, []string{c.op}, []string{"ptrace"})
						}
					})
				}
			})
		}
	})
}

func procStatus(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// TestNoCapabilitiesNoNewPrivs: CapEff 0 and NoNewPrivs 1 inside, even as root.
func TestNoCapabilitiesNoNewPrivs(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				ws := id.workspace(t)
				r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws), Argv: []string{"cat", "/proc/self/status"}, Dir: ws})
				requireExit(t, r, 0)
				st := procStatus(r.Stdout)
				for _, k := range []string{"CapEff", "CapPrm", "CapInh", "CapAmb"} {
					if st[k] != "0000000000000000" {
						t.Errorf("%s = %q, want 0000000000000000", k, st[k])
					}
				}
				switch {
				case !id.isRoot() && simulatedHostLacks("user-namespace"):
					// Without CAP_SETPCAP (no user namespace of its own) the
					// bounding set cannot be emptied (docs/DESIGN.md, process
					// model step 2); no_new_privs keeps a set-user-ID or
					// file-capability program from using it.
				case st["CapBnd"] != "0000000000000000":
					t.Errorf("CapBnd = %q, want 0000000000000000 (a setuid binary could regain capabilities)", st["CapBnd"])
				}
				if st["NoNewPrivs"] != "1" {
					t.Errorf("NoNewPrivs = %q, want 1", st["NoNewPrivs"])
				}
				if st["Seccomp"] != "2" {
					t.Errorf("Seccomp = %q, want 2 (filter mode)", st["Seccomp"])
				}
			})
		}
	})
}

// TestPrivilegedCallsDenied: keyring, new namespaces and mounts fail and are
// reported with the system call name.
func TestPrivilegedCallsDenied(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range confinedModes {
			for _, c := range []struct {
				name, script, op string
				targets          []string
				filtered         string // the call, as simulatedHostFilters names it
			}{
				{"keyctl", `python3 -c 'import ctypes,sys; l=ctypes.CDLL(None,use_errno=True); r=l.syscall(250, 0, -3, 1); print(r, ctypes.get_errno()); sys.exit(0 if r>=0 else 1)'`, "keyring", []string{"keyctl"}, ""},
				{"add_key", `python3 -c 'import ctypes,sys; l=ctypes.CDLL(None,use_errno=True); r=l.syscall(248, b"user", b"dsh", b"x", 1, -3); print(r, ctypes.get_errno()); sys.exit(0 if r>=0 else 1)'`, "keyring", []string{"add_key"}, ""},
				{"unshare -r", `unshare -r true`, "namespace", []string{"unshare"}, "unshare-user"},
				{"unshare -n (as mapped root)", `unshare -n true`, "namespace", []string{"unshare"}, "unshare"},
				{"mount tmpfs", `mount -t tmpfs none /mnt`, "mount", []string{"mount", "fsopen", "fsconfig", "fsmount", "move_mount", "open_tree"}, "mount"},
				{"bpf", `python3 -c 'import ctypes,sys; l=ctypes.CDLL(None,use_errno=True); r=l.syscall(321, 0, None, 0); print(r, ctypes.get_errno()); sys.exit(0 if r>=0 else 1)'`, "bpf", []string{"bpf"}, ""},
				{"userfaultfd", `python3 -c 'import ctypes,sys; l=ctypes.CDLL(None,use_errno=True); r=l.syscall(323, 0); print(r, ctypes.get_errno()); sys.exit(0 if r>=0 else 1)'`, "userfaultfd", []string{"userfaultfd"}, ""},
				{"io_uring_setup", `python3 -c 'import ctypes,sys; l=ctypes.CDLL(None,use_errno=True); p=ctypes.create_string_buffer(120); r=l.syscall(425, 4, p); print(r, ctypes.get_errno()); sys.exit(0 if r>=0 else 1)'`, "", nil, ""},
			} {
				t.Run(mode+"/"+c.name, func(t *testing.T) {
					ws := id.workspace(t)
					r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws), Argv: bash(c.script), Dir: ws})
					requireFailed(t, r)
					switch {
					case c.filtered != "" && simulatedHostFilters(c.filtered):
						// The host's own filter refuses the call first: it
						// fails, and the supervisor never hears of it.
						t.Logf("%s refuses %s itself: no denial fact", simulatedHostName(), c.filtered)
					case c.op != "":
						requireSyscallDenial(t, r, mode, []string{c.op}, c.targets)
					}
					if strings.Contains(c.name, "mount") {
						if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), " /mnt ") {
							t.Errorf("a mount appeared on the host's /mnt")
						}
					}
				})
			}
		}
	})
}

// TestInheritedFdNotUsable: an fd the caller leaks (fd 3, O_RDWR on a file
// outside the roots) does not reach the command; the file is unchanged.
func TestInheritedFdNotUsable(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				ws := id.workspace(t)
				out := id.outside(t)
				path := filepath.Join(out, "leaked")
				id.writeOwned(t, path, existingContent, 0o644)
				f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				r := id.run(t, runOpts{
					Flags:      sandboxFlags(mode, ws),
					Argv:       bash(`echo pwned >&3; s=$?; ls -l /proc/self/fd/ >&2; exit $s`),
					Dir:        ws,
					ExtraFiles: []*os.File{f},
				})
				requireFailed(t, r)
				requireContent(t, path, existingContent)
			})
		}
	})
}

// TestTIOCSTIDenied: terminal input injection is denied, also with garbage
// in the upper 32 bits of the request (the kernel truncates it to 32 bits).
// The command opens a pty and makes it its controlling terminal, so that
// without the sandbox TIOCSTI would succeed (dev.tty.legacy_tiocsti=1).
func tiocstiScript() string {
	return `python3 - "$HIGH" <<'EOF'
import fcntl, os, pty, sys, termios
high = int(sys.argv[1])
m, s = pty.openpty()
pid = os.fork()
if pid == 0:
    os.setsid()
    fcntl.ioctl(s, termios.TIOCSCTTY, 0)
    try:
        fcntl.ioctl(s, termios.TIOCSTI | high, b"x")
    except OSError as e:
        print("denied", e.errno, flush=True); os._exit(1)
    print("injected", flush=True); os._exit(0)
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st))
EOF`
}

// Where the command cannot allocate a pty (no mount view: a new pty's slave
// would be a terminal of the host's devpts), it tries TIOCSTI on its stdin,
// a pty of the host's given to it: denied, with the fact, and nothing
// reaches that terminal's input.
func TestTIOCSTIDenied(t *testing.T) {
	script := tiocstiScript()
	ownPty := !simulatedHostLacks("mount-view")
	if !ownPty {
		script = `python3 -c '
import fcntl, sys, termios
try:
    fcntl.ioctl(0, termios.TIOCSTI | int(sys.argv[1]), b"x")
except OSError as e:
    print("denied", e.errno, flush=True); sys.exit(1)
print("injected", flush=True)' "$HIGH"`
	}
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range confinedModes {
			for _, v := range []struct{ name, high string }{{"plain", "0"}, {"upper bits set", "4294967296"}} {
				t.Run(mode+"/"+v.name, func(t *testing.T) {
					ws := id.workspace(t)
					o := runOpts{Flags: sandboxFlags(mode, ws), Argv: bash(script), Env: []string{"HIGH=" + v.high}, Dir: ws}
					var p *hostPty
					if !ownPty {
						p = newHostPty(t, id)
						sfd, err := unix.Dup(p.slave)
						if err != nil {
							t.Fatal(err)
						}
						o.Stdin = os.NewFile(uintptr(sfd), p.name)
						defer o.Stdin.Close()
					}
					r := id.run(t, o)
					requireFailed(t, r)
					if p != nil {
						end := "end-" + nonce()
						if _, err := unix.Write(p.master, []byte(end)); err != nil {
							t.Fatal(err)
						}
						if got := readUntil(t, p.slave, end); got != "" {
							t.Errorf("the terminal's input holds %q: injected", got)
						}
					}
					if strings.Contains(r.Stdout, "injected") {
						t.Errorf("TIOCSTI succeeded")
					}
					requireSyscallDenial(t, r, mode, []string{"ioctl"}, []string{"ioctl", "TIOCSTI"})
				})
			}
		}
	})
}

// TestTIOCSTIControl: the same injection works in danger-full-access, proving
// the denial above is the sandbox's.
func TestTIOCSTIControl(t *testing.T) {
	// Before Linux 6.2 there is no such sysctl: TIOCSTI always works on
	// the caller's own terminal. With it at 0, only CAP_SYS_ADMIN (root,
	// unconfined) may inject.
	b, err := os.ReadFile("/proc/sys/dev/tty/legacy_tiocsti")
	legacy := err != nil || strings.TrimSpace(string(b)) == "1"
	forEachIdentity(t, func(t *testing.T, id identity) {
		if !legacy && id.uid != 0 {
			t.Skip("dev.tty.legacy_tiocsti is 0: TIOCSTI needs CAP_SYS_ADMIN on this host anyway")
		}
		ws := id.workspace(t)
		script := strings.Replace(tiocstiScript(), "$HIGH", "0", 1)
		r := id.run(t, runOpts{Flags: sandboxFlags("danger-full-access", ws), Argv: bash(script), Dir: ws})
		requireExit(t, r, 0)
	})
}

// btrfsScript calls the btrfs subvolume ioctls and fscrypt's key removal on
// the working directory and prints each one's errno (0: done).
const btrfsScript = `python3 -c '
import fcntl, os
fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
for name, req, at in (("SUBVOL_CREATE", 0x5000940e, 8), ("SUBVOL_CREATE_V2", 0x50009418, 56),
                      ("SNAP_CREATE_V2", 0x50009417, 56), ("SNAP_DESTROY", 0x5000940f, 8),
                      ("SUBVOL_SETFLAGS", 0x4008941a, 8), ("REMOVE_ENCRYPTION_KEY", 0xc0406618, 8)):
    buf = bytearray(4096)
    buf[0:8] = fd.to_bytes(8, "little")
    buf[at:at + 3] = b"sub"
    try:
        fcntl.ioctl(fd, req, buf)
        print(name, 0, flush=True)
    except OSError as e:
        print(name, e.errno, flush=True)
'`

// TestBtrfsSubvolumeIoctlsDenied: the btrfs ioctls that make a subvolume or
// a snapshot (a directory entry the kernel creates without Landlock's path
// hooks, through a descriptor opened for reading), remove one or change one,
// and fscrypt's key removal, are refused (EPERM) with a fact in every
// confined mode and host configuration — on any filesystem: here the
// workspace's, which answers ENOTTY to the btrfs ones unconfined
// (TestBtrfsSubvolumeIoctlsControl). Measured on a btrfs loop mount
// (2026-12-06): under Docker's profile (no mount view) a workspace-write
// command made a subvolume outside its writable roots before this.
func TestBtrfsSubvolumeIoctlsDenied(t *testing.T) {
	forEachHost(t, func(t *testing.T, h hostConfig, id identity) {
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				ws := id.workspace(t)
				r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags(mode, ws), Argv: bash(btrfsScript), Dir: ws})
				requireExit(t, r, 0)
				for _, name := range []string{"SUBVOL_CREATE", "SUBVOL_CREATE_V2", "SNAP_CREATE_V2", "SNAP_DESTROY", "SUBVOL_SETFLAGS", "REMOVE_ENCRYPTION_KEY"} {
					if !hasLine(r.Stdout, fmt.Sprintf("%s %d", name, unix.EPERM)) {
						t.Errorf("%s: want EPERM; stdout=%q", name, r.Stdout)
					}
				}
				requireAbsent(t, filepath.Join(ws, "sub"))
				requireSyscallDenial(t, r, mode, []string{"ioctl"}, []string{"BTRFS_IOC_SUBVOL_CREATE"})
				requireSyscallDenial(t, r, mode, []string{"ioctl"}, []string{"BTRFS_IOC_SNAP_CREATE_V2"})
				requireSyscallDenial(t, r, mode, []string{"ioctl"}, []string{"FS_IOC_REMOVE_ENCRYPTION_KEY"})
			})
		}
	})
}

// TestBtrfsSubvolumeIoctlsControl: unconfined, the same calls reach the
// workspace's filesystem, which answers for itself (ENOTTY where it is not
// btrfs): the EPERM above is the sandbox's.
func TestBtrfsSubvolumeIoctlsControl(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws := id.workspace(t)
		r := id.run(t, runOpts{Flags: sandboxFlags("danger-full-access", ws), Argv: bash(btrfsScript), Dir: ws})
		requireExit(t, r, 0)
		var st unix.Statfs_t
		if err := unix.Statfs(ws, &st); err != nil {
			t.Fatal(err)
		}
		if st.Type == unix.BTRFS_SUPER_MAGIC {
			t.Fatalf("the workspace %s is on btrfs: this control expects another filesystem", ws)
		}
		if !hasLine(r.Stdout, fmt.Sprintf("SUBVOL_CREATE %d", unix.ENOTTY)) {
			t.Errorf("want ENOTTY from the filesystem; stdout=%q", r.Stdout)
		}
	})
}
