//go:build linux

package integration

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Outside the writable roots a refused write-like call gets what the same
// call gets on a read-only mount (docs/DESIGN.md, "Refusals the kernel's
// way"): EROFS where the mount is what stops it (a denial fact), and the
// kernel's own EEXIST, ENOENT, ENOTDIR, EISDIR where the call fails without
// any sandbox (no fact). Each case runs in the sandbox, and again as the
// same identity on a read-only bind mount of the same directory (the
// reference, from the kernel itself).

// roCase is one call on a path P of a directory outside the roots that the
// identity owns; want is the errno name it gets ("ok": it succeeds), fact
// whether the sandbox records a denial of P.
type roCase struct {
	label, path, py, want string
	fact                  bool
}

var roCases = []roCase{
	{"mkdir an existing directory", "d", "os.mkdir(P)", "EEXIST", false},
	{"mkdir a new directory", "new-dir", "os.mkdir(P)", "EROFS", true},
	{"mkdir, parent missing", "missing/x", "os.mkdir(P)", "ENOENT", false},
	{"mkdir, parent a file", "f/x", "os.mkdir(P)", "ENOTDIR", false},
	{"makedirs of an existing tree", "d", "os.makedirs(P, exist_ok=True)", "ok", false},
	{"create a new file", "new-file", "os.open(P, os.O_WRONLY|os.O_CREAT)", "EROFS", true},
	{"open an existing file for writing", "f", "os.open(P, os.O_WRONLY)", "EROFS", true},
	{"append to an existing file", "f-append", "open(P, 'a')", "EROFS", true},
	{"O_CREAT, read-only, of an existing file", "f-creat", "os.open(P, os.O_RDONLY|os.O_CREAT)", "ok", false},
	{"O_CREAT|O_EXCL of an existing file", "f-excl", "os.open(P, os.O_WRONLY|os.O_CREAT|os.O_EXCL)", "EEXIST", false},
	{"open a missing file for writing", "gone", "os.open(P, os.O_WRONLY)", "ENOENT", false},
	{"O_CREAT on a directory", "d-creat", "os.open(P, os.O_WRONLY|os.O_CREAT)", "EISDIR", false},
	{"unlink an existing file", "f-unlink", "os.unlink(P)", "EROFS", true},
	{"unlink a missing file", "gone-unlink", "os.unlink(P)", "EROFS", false},
	{"rmdir a missing directory", "gone-rmdir", "os.rmdir(P)", "EROFS", false},
	{"rename an existing file", "f-rename", "os.rename(P, P + '.new')", "EROFS", true},
	{"rename a missing file", "gone-rename", "os.rename(P, P + '.new')", "EROFS", false},
	{"symlink over an existing name", "f-symlink", "os.symlink('x', P)", "EEXIST", false},
	{"symlink a new name", "new-symlink", "os.symlink('x', P)", "EROFS", true},
	{"mkfifo a new name", "new-fifo", "os.mkfifo(P)", "EROFS", true},
	{"truncate an existing file", "f-truncate", "os.truncate(P, 0)", "EROFS", true},
	{"truncate a missing file", "gone-truncate", "os.truncate(P, 0)", "ENOENT", false},
}

// roScript runs every case on directory argv[1] and prints "LABEL: ERRNO".
func roScript() string {
	var b strings.Builder
	b.WriteString("import errno, os, sys\nD = sys.argv[1]\ndef run(label, path, f):\n    P = os.path.join(D, path)\n" +
		"    try:\n        f(P)\n        print(label + ': ok')\n    except OSError as e:\n        print(label + ': ' + errno.errorcode[e.errno])\n")
	for _, c := range roCases {
		fmt.Fprintf(&b, "run(%q, %q, lambda P: %s)\n", c.label, c.path, c.py)
	}
	return b.String()
}

// roFixture fills dir (owned by the identity) with what the cases expect.
func roFixture(t *testing.T, id identity, dir string) {
	t.Helper()
	for _, d := range []string{"d", "d-creat"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(filepath.Join(dir, d), int(id.uid), int(id.gid)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"f", "f-append", "f-creat", "f-excl", "f-unlink", "f-rename", "f-symlink", "f-truncate"} {
		id.writeOwned(t, filepath.Join(dir, f), "keep\n", 0o644)
	}
}

// roSnapshot lists dir's entries with their sizes: what must not change.
func roSnapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v %d\n", p, info.Mode(), info.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// readOnlyReference runs the script as the identity on a read-only bind
// mount of dir (in a mount namespace of its own; for an unprivileged
// identity, in a user namespace mapping it to root, where its own files
// stay writable by DAC): what the kernel answers.
func readOnlyReference(t *testing.T, id identity, dir, script string) string {
	t.Helper()
	flags := "-m"
	if !id.isRoot() {
		flags = "-rm"
	}
	sh := fmt.Sprintf("mount --bind %[1]s %[1]s && mount -o remount,bind,ro %[1]s && exec python3 -c \"$0\" %[1]s", dir)
	cmd := exec.Command("unshare", flags, "sh", "-c", sh, script)
	cmd.Env = id.env()
	cmd.Dir = "/"
	cmd.SysProcAttr = id.sysProcAttr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the read-only reference (unshare %s, a bind mount) failed: %v: %s", flags, err, out)
	}
	return string(out)
}

// TestRefusalsLikeReadOnlyMount: every case gets the same answer in the
// sandbox as on a read-only mount, the one the table says; a denial fact
// exactly for the calls the sandbox refused; nothing changed on disk. On
// every host with a supervisor (with and without a mount view), as root and
// unprivileged, in both confined modes.
//
// Below Landlock ABI 3 without a mount view truncate(2) is refused from
// its registers, EACCES with a fact, wherever it points (OpenGuard).
func TestRefusalsLikeReadOnlyMount(t *testing.T) {
	table := func(cases []roCase) string {
		var b strings.Builder
		for _, c := range cases {
			fmt.Fprintf(&b, "%s: %s\n", c.label, c.want)
		}
		return b.String()
	}
	script := roScript()
	forEachHostOf(t, supervisedHosts, func(t *testing.T, h hostConfig, id identity) {
		ref := id.outside(t)
		roFixture(t, id, ref)
		if got, want := readOnlyReference(t, id, ref, script), table(roCases); got != want {
			t.Fatalf("the kernel's read-only mount answers\n%s\nthe table says\n%s", got, want)
		}
		cases := slices.Clone(roCases)
		if abi, _ := landlockABI(); abi < 3 && !h.mountView() {
			for i := range cases {
				if strings.HasPrefix(cases[i].py, "os.truncate(") {
					cases[i].want, cases[i].fact = "EACCES", true
				}
			}
		}
		want := table(cases)
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				dir := id.outside(t)
				roFixture(t, id, dir)
				before := roSnapshot(t, dir)
				ws := id.workspace(t)
				r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags(mode, ws), Argv: []string{"python3", "-c", script, dir}, Dir: ws})
				requireExit(t, r, 0)
				if r.Stdout != want {
					t.Errorf("the sandbox answers\n%s\nwant\n%s", r.Stdout, want)
				}
				rep := requireReport(t, r)
				denied := map[string]bool{}
				for _, d := range rep.Denials {
					denied[d.target()] = true
				}
				for _, c := range cases {
					p := filepath.Join(dir, c.path)
					if denied[p] != c.fact {
						t.Errorf("%s: denial fact of %s = %v, want %v (denials %v)", c.label, p, denied[p], c.fact, rep.Denials)
					}
					if c.fact {
						requireDenial(t, r, mode, opOf(c.py), p)
					}
				}
				if after := roSnapshot(t, dir); after != before {
					t.Errorf("the directory changed:\n%s\nwas\n%s", after, before)
				}
			})
		}
	})
}

// opOf is the denial op of a case's call.
func opOf(py string) string {
	switch {
	case strings.HasPrefix(py, "os.mkdir("):
		return "mkdir"
	case strings.HasPrefix(py, "os.unlink("), strings.HasPrefix(py, "os.rmdir("):
		return "remove"
	case strings.HasPrefix(py, "os.rename("):
		return "rename"
	case strings.HasPrefix(py, "os.symlink("):
		return "symlink"
	case strings.HasPrefix(py, "os.mkfifo("):
		return "mknod"
	case strings.HasPrefix(py, "os.truncate("):
		return "truncate"
	}
	return "write"
}

// TestStaleSocketRefused: a socket file nothing is bound to any more (a
// daemon's, left in the workspace by an earlier run, or outside the roots)
// answers connect and sendto with the kernel's ECONNREFUSED, and that is
// not a denial (a tool restarts its daemon on it); a host listener at the
// same kind of place is still denied with a fact (and sees nothing).
func TestStaleSocketRefused(t *testing.T) {
	forEachHostOf(t, supervisedHosts, func(t *testing.T, h hostConfig, id identity) {
		ws := id.workspace(t)
		out := id.outside(t)
		stale := func(p string, typ string) {
			t.Helper()
			l, err := net.Listen(typ, p)
			if err != nil {
				t.Fatal(err)
			}
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			l.Close()
			if err := os.Lchown(p, int(id.uid), int(id.gid)); err != nil && os.Geteuid() == 0 {
				t.Fatal(err)
			}
		}
		stale(filepath.Join(ws, "daemon.sock"), "unix")
		stale(filepath.Join(out, "daemon.sock"), "unix")
		live := filepath.Join(ws, "live.sock")
		ln, err := net.Listen("unix", live)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if err := os.Chmod(live, 0o777); err != nil {
			t.Fatal(err)
		}
		accepted := make(chan struct{}, 1)
		go func() {
			if c, err := ln.Accept(); err == nil {
				accepted <- struct{}{}
				c.Close()
			}
		}()
		py := `import errno, socket, sys
for p in sys.argv[1:]:
    for typ in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        s = socket.socket(socket.AF_UNIX, typ)
        try:
            if typ == socket.SOCK_STREAM:
                s.connect(p)
            else:
                s.sendto(b"x", p)
            print(p, typ, "ok")
        except OSError as e:
            print(p, typ, errno.errorcode[e.errno])
`
		stales := []string{filepath.Join(ws, "daemon.sock"), filepath.Join(out, "daemon.sock")}
		r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags("workspace-write", ws), Argv: []string{"python3", "-c", py, stales[0], stales[1]}, Dir: ws})
		requireExit(t, r, 0)
		var want strings.Builder
		for _, p := range stales {
			fmt.Fprintf(&want, "%s 1 ECONNREFUSED\n%s 2 ECONNREFUSED\n", p, p)
		}
		if r.Stdout != want.String() {
			t.Errorf("stdout:\n%s\nwant\n%s", r.Stdout, want.String())
		}
		requireNoDenials(t, r)

		r = id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags("workspace-write", ws), Argv: []string{"python3", "-c", py, live}, Dir: ws})
		requireExit(t, r, 0)
		if w := fmt.Sprintf("%s 1 EACCES\n", live); !strings.HasPrefix(r.Stdout, w) {
			t.Errorf("stdout %q, want it to start with %q", r.Stdout, w)
		}
		requireDenial(t, r, "workspace-write", "connect", live)
		select {
		case <-accepted:
			t.Error("the host listener accepted a connection from the sandbox")
		default:
		}

		if id.isRoot() {
			// A host listener on an overlay whose layers lie on different
			// filesystems (a container's root, the VM guest's): stat gives
			// another device than the socket's; still a listener.
			lower, err := os.MkdirTemp("/dev/shm", "dsh-it-lower-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(lower)
			// The upper layer on /var/tmp (an overlay cannot take one on
			// an overlay, as the VM guest's /var/lib is), the merged
			// directory outside the roots.
			up, err := os.MkdirTemp("/var/tmp", "dsh-it-upper-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(up)
			merged := filepath.Join(id.outside(t), "m")
			for _, d := range []string{filepath.Join(up, "u"), filepath.Join(up, "w"), merged} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			opts := "lowerdir=" + lower + ",upperdir=" + filepath.Join(up, "u") + ",workdir=" + filepath.Join(up, "w")
			if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
				t.Fatalf("mount an overlay for the test: %v", err)
			}
			defer unix.Unmount(merged, unix.MNT_DETACH)
			ovl := filepath.Join(merged, "h.sock")
			ol, err := net.Listen("unix", ovl)
			if err != nil {
				t.Fatal(err)
			}
			defer ol.Close()
			r = id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags("workspace-write", ws), Argv: []string{"python3", "-c", py, ovl}, Dir: ws})
			requireExit(t, r, 0)
			if w := fmt.Sprintf("%s 1 EACCES\n", ovl); !strings.HasPrefix(r.Stdout, w) {
				t.Errorf("overlay listener: stdout %q, want it to start with %q", r.Stdout, w)
			}
			requireDenial(t, r, "workspace-write", "connect", ovl)
		}
	})
}
