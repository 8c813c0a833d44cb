//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Hosts without the mount view (no user namespaces, Ubuntu's AppArmor
// restriction, Docker's seccomp profile) have Landlock as their only
// filesystem layer, and Landlock cannot see two things:
//
//   - truncation before ABI 3 (Debian 12's 6.1 has ABI 2): truncate(2), and
//     open with O_TRUNC and an access mode that is not writable
//     (O_RDONLY|O_TRUNC, 3|O_TRUNC), which Linux honours when DAC allows
//     writing;
//   - opens with access mode 3 (O_ACCMODE: an fd for ioctl only), for which
//     its file_open hook requires no right at all, devices included.
//
// There the seccomp filter refuses them — by the supervisor, from the
// call's registers alone, or in the kernel without user notification — and
// openat2, whose flags the filter cannot see, answers ENOSYS.
//
// Each host runs twice: as it is (Landlock ABI 7 here, so Landlock itself
// refuses truncation and those cases prove only the end state), and with
// `degrade abi2`, under which dsh-sandbox-run builds a genuine ABI-2
// ruleset that this kernel enforces as 6.1 does (no TRUNCATE right
// handled). Without the fix, under abi2 (and on a real 6.1 in the VM):
// docker truncates the files outright (truncate(2), O_RDONLY|O_TRUNC,
// openat2 all succeed: no rule for them without notify); the notify hosts
// pre-deny truncation by path but continue it inside the workspace, so
// os.truncate there succeeds (the "inside" cases expect EACCES) and the
// raced path below wins; and on every host and ABI the access-mode-3 opens
// succeed and openat2 gets through to the path check instead of ENOSYS.

// withABI2 is degradation d on a kernel with Landlock ABI 2.
func withABI2(d degradation) degradation {
	return degradation{
		name: d.name + ", Landlock ABI 2",
		wrap: func() []string {
			w := append([]string{}, d.wrap()...)
			if len(w) >= 2 && w[0] == degradeBin {
				w[1] += "+abi2"
				return w
			}
			return append(w, degradeBin, "abi2")
		},
		need: func(t *testing.T, id identity) {
			needHelper(t)
			d.need(t, id)
		},
	}
}

// noViewHost is a host configuration without the mount view.
type noViewHost struct {
	d      degradation
	notify bool // the supervisor gets user notification (denial facts)
	abi2   bool // Landlock ABI 2, simulated
}

func noViewHosts() []noViewHost {
	var out []noViewHost
	for _, h := range []noViewHost{{d: degradedNoUserNS, notify: true}, {d: degradedUserNSOnly, notify: true}, {d: degradedDocker, notify: true}, {d: degradedNoNotify}} {
		out = append(out, h, noViewHost{d: withABI2(h.d), notify: h.notify, abi2: true})
	}
	return out
}

// guardScript runs each probe and prints "NAME ok" or "NAME ERRNO". The
// access-mode-3 and O_TRUNC opens go through open(2) (ctypes) and openat(2)
// (os.open); openat2 gets O_RDONLY|O_TRUNC in its struct open_how.
const guardScript = `
import ctypes, errno, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
OUT, WS, DEV = os.environ["OUT"], os.environ["WS"], os.environ["DEV"]
class OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]
def rawcall(*args):
    r = libc.syscall(*args)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r
def sys_open(path, flags):
    return rawcall(ctypes.c_long(2), ctypes.c_char_p(path.encode()), ctypes.c_long(flags), ctypes.c_long(0))
def sys_openat2(path, flags):
    how = OpenHow(flags, 0, 0)
    return rawcall(ctypes.c_long(437), ctypes.c_long(-100), ctypes.c_char_p(path.encode()), ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
def probe(name, f):
    try:
        fd = f()
        if isinstance(fd, int):
            os.close(fd)
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, str(e.errno)))
    sys.stdout.flush()
probe("truncate", lambda: os.truncate(OUT + "/truncate", 0))
probe("open-rdonly-trunc", lambda: sys_open(OUT + "/open-rdonly-trunc", os.O_RDONLY | os.O_TRUNC))
probe("openat-rdonly-trunc", lambda: os.open(OUT + "/openat-rdonly-trunc", os.O_RDONLY | os.O_TRUNC))
probe("openat-ioctl-trunc", lambda: os.open(OUT + "/openat-ioctl-trunc", 3 | os.O_TRUNC))
probe("open-ioctl", lambda: sys_open(OUT + "/open-ioctl", 3))
probe("openat-ioctl", lambda: os.open(OUT + "/openat-ioctl", 3))
probe("ioctl-tty", lambda: os.open(DEV, 3 | os.O_NOCTTY))
probe("ioctl-null", lambda: os.open("/dev/null", 3))
probe("openat2", lambda: sys_openat2(OUT + "/openat2", os.O_RDONLY | os.O_TRUNC))
probe("openat2-ws", lambda: sys_openat2(WS + "/readable", os.O_RDONLY))
if sys.argv[1] == "workspace-write":
    probe("ws-truncate", lambda: os.truncate(WS + "/ws-truncate", 0))
    probe("ws-rdonly-trunc", lambda: os.open(WS + "/ws-rdonly-trunc", os.O_RDONLY | os.O_TRUNC))
    probe("ws-ioctl", lambda: os.open(WS + "/ws-ioctl", 3))
    # A path that names a workspace file while the supervisor reads it and
    # an outside file when the kernel does: only a decision that never
    # continues on what it read holds.
    inside, outside = (WS + "/decoy").encode(), (OUT + "/raced").encode()
    buf = ctypes.create_string_buffer(max(len(inside), len(outside)) + 1)
    buf.value = inside
    stop = False
    def flip():
        while not stop:
            ctypes.memmove(buf, outside, len(outside) + 1)
            ctypes.memmove(buf, inside, len(inside) + 1)
    th = threading.Thread(target=flip)
    th.start()
    for i in range(400):
        libc.truncate(buf, ctypes.c_long(0))
        fd = libc.open(buf, ctypes.c_int(os.O_RDONLY | os.O_TRUNC))
        if fd >= 0:
            os.close(fd)
    stop = True
    th.join()
    print("race done")
`

// TestNoMountViewRefusesTruncationAndIoctlOpens: on every host without the
// mount view, in both confined modes, truncation outside the roots, opens
// with access mode 3 (files and devices) and openat2 fail with the
// expected errno, the files are unchanged, and where the supervisor runs
// each denial is a fact. Inside the workspace truncate(2) and
// O_RDONLY|O_TRUNC fail too below ABI 3 (a decision by path would be
// raceable), and work from ABI 3 (Landlock handles truncation).
func TestNoMountViewRefusesTruncationAndIoctlOpens(t *testing.T) {
	t.Parallel()
	outsideFiles := []string{"truncate", "open-rdonly-trunc", "openat-rdonly-trunc", "openat-ioctl-trunc", "open-ioctl", "openat-ioctl", "openat2", "raced"}
	wsFiles := []string{"ws-truncate", "ws-rdonly-trunc", "ws-ioctl", "decoy", "readable"}
	for _, h := range noViewHosts() {
		t.Run(h.d.name, func(t *testing.T) {
			forEachIdentity(t, func(t *testing.T, id identity) {
				h.d.need(t, id)
				hostABI := requireLandlock(t)
				for _, mode := range confinedModes {
					t.Run(mode, func(t *testing.T) {
						ws, out := id.workspace(t), id.outside(t)
						for _, f := range outsideFiles {
							id.writeOwned(t, filepath.Join(out, f), existingContent, 0o644)
						}
						for _, f := range wsFiles {
							id.writeOwned(t, filepath.Join(ws, f), existingContent, 0o644)
						}
						pty := newHostPty(t, id)
						r := id.run(t, runOpts{
							Wrap:  h.d.wrap(),
							Flags: sandboxFlags(mode, ws),
							Argv:  []string{"python3", "-c", guardScript, mode},
							Env:   []string{"OUT=" + out, "WS=" + ws, "DEV=" + pty.name},
							Dir:   ws,
						})
						requireExit(t, r, 0)
						rep := requireReport(t, r)
						abi := rep.Enforcement.LandlockABI
						wantABI := hostABI
						if h.abi2 {
							wantABI = 2
						}
						if abi != wantABI {
							t.Fatalf("report landlockAbi = %d, want %d (is the simulation on?)", abi, wantABI)
						}
						if contains(rep.Enforcement.Layers, "mount-view") || contains(rep.Enforcement.Layers, "seccomp-notify") != h.notify {
							t.Fatalf("layers = %v, want no mount-view and seccomp-notify=%v", rep.Enforcement.Layers, h.notify)
						}
						if contains(rep.Enforcement.Missing, "truncate") {
							t.Errorf("missing = %v lists truncate", rep.Enforcement.Missing)
						}
						got := probeResults(r.Stdout)
						// A truncation outside the roots that the guard
						// does not refuse from its registers (ABI 3 on)
						// reaches the supervisor, which answers as a
						// read-only mount would; without one, Landlock.
						outsideTrunc := "EROFS"
						if abi < 3 || !h.notify {
							outsideTrunc = "EACCES"
						}
						want := map[string]string{
							"truncate": outsideTrunc, "open-rdonly-trunc": outsideTrunc, "openat-rdonly-trunc": outsideTrunc,
							"openat-ioctl-trunc": "EACCES", "open-ioctl": "EACCES", "openat-ioctl": "EACCES",
							"ioctl-tty": "EACCES", "ioctl-null": "EACCES", "openat2": "ENOSYS", "openat2-ws": "ENOSYS",
						}
						if mode == "workspace-write" {
							want["ws-ioctl"] = "EACCES"
							if abi < 3 {
								want["ws-truncate"], want["ws-rdonly-trunc"] = "EACCES", "EACCES"
							} else {
								want["ws-truncate"], want["ws-rdonly-trunc"] = "ok", "ok"
							}
							if !hasLine(r.Stdout, "race done") {
								t.Errorf("the race did not finish: %v", r)
							}
						}
						for name, w := range want {
							if got[name] != w {
								t.Errorf("%s: %q, want %q", name, got[name], w)
							}
						}
						for _, f := range outsideFiles {
							requireContent(t, filepath.Join(out, f), existingContent)
						}
						if mode == "workspace-write" {
							truncated := ""
							if abi < 3 {
								truncated = existingContent
							}
							requireContent(t, filepath.Join(ws, "ws-truncate"), truncated)
							requireContent(t, filepath.Join(ws, "ws-rdonly-trunc"), truncated)
							requireContent(t, filepath.Join(ws, "ws-ioctl"), existingContent)
						}
						if !h.notify {
							if len(rep.Denials) != 0 {
								t.Errorf("denials without user notification: %v", rep.Denials)
							}
							return
						}
						requireDenial(t, r, mode, "truncate", filepath.Join(out, "truncate"))
						for _, f := range []string{"open-rdonly-trunc", "openat-rdonly-trunc", "openat-ioctl-trunc", "open-ioctl", "openat-ioctl"} {
							requireDenial(t, r, mode, "write", filepath.Join(out, f))
						}
						requireDenial(t, r, mode, "write", pty.name)
						requireDenial(t, r, mode, "write", "/dev/null")
						if mode == "workspace-write" {
							requireDenial(t, r, mode, "write", filepath.Join(ws, "ws-ioctl"))
							if abi < 3 {
								requireDenial(t, r, mode, "truncate", filepath.Join(ws, "ws-truncate"))
								requireDenial(t, r, mode, "write", filepath.Join(ws, "ws-rdonly-trunc"))
							}
						}
						// openat2's ENOSYS is a fallback, not a denial: no fact.
						for _, d := range rep.Denials {
							if d.Syscall == "openat2" {
								t.Errorf("a fact for openat2: %v", d)
							}
						}
					})
				}
			})
		})
	}
}

// TestNoMountViewTruncationTwins: what truncates through an fd open for
// writing — truncate(1) (open, then ftruncate), a shell's "> file", an
// O_WRONLY|O_TRUNC open — still works inside the workspace on every host
// without the mount view, below ABI 3 too, with no denial.
func TestNoMountViewTruncationTwins(t *testing.T) {
	for _, h := range noViewHosts() {
		t.Run(h.d.name, func(t *testing.T) {
			forEachIdentity(t, func(t *testing.T, id identity) {
				h.d.need(t, id)
				ws := id.workspace(t)
				for _, f := range []string{"a", "b", "c", "d"} {
					id.writeOwned(t, filepath.Join(ws, f), existingContent, 0o644)
				}
				r := id.run(t, runOpts{
					Wrap:  h.d.wrap(),
					Flags: sandboxFlags("workspace-write", ws),
					Argv: bash(`set -e; truncate -s 0 a; : > b; truncate -s 3 c
python3 -c 'import os; os.close(os.open("d", os.O_WRONLY | os.O_TRUNC))'`),
					Dir: ws,
				})
				requireExit(t, r, 0)
				requireNoDenials(t, r)
				for _, f := range []string{"a", "b", "d"} {
					requireContent(t, filepath.Join(ws, f), "")
				}
				requireContent(t, filepath.Join(ws, "c"), existingContent[:3])
				if h.abi2 && requireReport(t, r).Enforcement.LandlockABI != 2 {
					t.Errorf("report landlockAbi = %d, want 2 (is the simulation on?)", r.Report.Enforcement.LandlockABI)
				}
			})
		})
	}
}

// TestMountViewKeepsTruncateAndOpenat2: with the mount view nothing of the
// above applies (read-only, nodev mounts back Landlock): truncate(2),
// O_RDONLY|O_TRUNC and access-mode-3 opens work inside the workspace — on
// ABI 2 too. openat2 answers ENOSYS with a mount view as well (its mode lies
// in memory, where a set-ID bit could not be seen race-free: setid_test.go),
// without a fact, and the caller's fallback to openat reads the file.
func TestMountViewKeepsTruncateAndOpenat2(t *testing.T) {
	full := degradation{name: "full host", wrap: func() []string { return nil }, need: func(t *testing.T, id identity) { requireLandlock(t) }}
	for _, d := range []degradation{full, withABI2(full)} {
		t.Run(d.name, func(t *testing.T) {
			if d.name == full.name && simulatedHostLacks("mount-view") {
				// (The ABI 2 variant wraps its own host: the full one.)
				skipOnSimulatedHost(t, "no mount view, this test's subject; what holds without one is TestNoMountViewRefusesTruncationAndIoctlOpens's")
			}
			forEachIdentity(t, func(t *testing.T, id identity) {
				d.need(t, id)
				ws := id.workspace(t)
				for _, f := range []string{"t", "r", "i", "o"} {
					id.writeOwned(t, filepath.Join(ws, f), existingContent, 0o644)
				}
				r := id.run(t, runOpts{
					Wrap:  d.wrap(),
					Flags: sandboxFlags("workspace-write", ws),
					Argv: []string{"python3", "-c", `
import ctypes, os
os.truncate("t", 0)
os.close(os.open("r", os.O_RDONLY | os.O_TRUNC))
os.close(os.open("i", 3))
libc = ctypes.CDLL(None, use_errno=True)
how = (ctypes.c_uint64 * 3)(os.O_RDONLY, 0, 0)
fd = libc.syscall(ctypes.c_long(437), ctypes.c_long(-100), ctypes.c_char_p(b"o"), how, ctypes.c_size_t(24))
assert fd < 0 and ctypes.get_errno() == 38, "openat2: %d %s" % (fd, os.strerror(ctypes.get_errno()))
fd = os.open("o", os.O_RDONLY)
print(os.read(fd, 100).decode(), end="")
`},
					Dir: ws,
				})
				requireExit(t, r, 0)
				requireNoDenials(t, r)
				rep := requireReport(t, r)
				if !contains(rep.Enforcement.Layers, "mount-view") {
					t.Fatalf("layers = %v, want the mount view", rep.Enforcement.Layers)
				}
				if d.name != full.name && rep.Enforcement.LandlockABI != 2 {
					t.Errorf("report landlockAbi = %d, want 2 (is the simulation on?)", rep.Enforcement.LandlockABI)
				}
				requireContent(t, filepath.Join(ws, "t"), "")
				requireContent(t, filepath.Join(ws, "r"), "")
				requireContent(t, filepath.Join(ws, "i"), existingContent)
				if r.Stdout != existingContent {
					t.Errorf("the fallback read %q, want %q", r.Stdout, existingContent)
				}
			})
		})
	}
}

// TestABI2Helper checks the simulation itself: the first version queries
// answer 2, the supervisor's SO_SNDBUF call ends it, later queries fail
// with ENOSYS.
func TestABI2Helper(t *testing.T) {
	needHelper(t)
	requireLandlock(t)
	out, err := execCombined(degradeBin, "abi2", "python3", "-c", `
import ctypes, socket
l = ctypes.CDLL(None, use_errno=True)
def v():
    r = l.syscall(ctypes.c_long(444), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(1))
    return r if r >= 0 else -ctypes.get_errno()
a = v(); b = v()
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536); c = 0
except OSError as e:
    c = -e.errno
print(a, b, c, v())`)
	if err != nil {
		t.Fatalf("degrade abi2 python3: %v: %s", err, out)
	}
	if got := strings.TrimSpace(out); got != "2 2 -38 -38" {
		t.Fatalf("version, version, SO_SNDBUF, version = %q, want \"2 2 -38 -38\"", got)
	}
}

// probeResults parses the "NAME RESULT" lines of guardScript.
func probeResults(stdout string) map[string]string {
	m := map[string]string{}
	for _, l := range lines(stdout) {
		if f := strings.Fields(l); len(f) == 2 {
			m[f[0]] = f[1]
		}
	}
	return m
}

func execCombined(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "PATH="+testPATH)
	b, err := cmd.CombinedOutput()
	return string(b), err
}
