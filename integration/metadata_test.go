//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Metadata changes — chmod, chown, utimes, xattrs, inode flags — need no
// Landlock right. With a mount view the kernel refuses them outside the
// writable roots (read-only mounts, EROFS); without one the supervisor
// performs them itself, on the files the policy lets the command change,
// and refuses the rest with EROFS and a denial fact. Each test runs on the
// full host, on the simulated hosts without a mount view, and under Docker's
// seccomp profile (a supervisor, no user namespace, no pidfd_getfd, no
// unshare(CLONE_FS)). Without user notification metadata-writes is reported
// missing (nonotify_test.go).

var metadataHosts = []hostConfig{
	{"full host", nil},
	{"no user namespaces", &degradedNoUserNS},
	{"user namespace only", &degradedUserNSOnly},
	{"docker seccomp profile", &degradedDocker},
}

// metaState is what a metadata change could alter.
type metaState struct {
	mode        os.FileMode
	uid, gid    uint32
	mtime       int64
	xattrs      string
	flags       int
	flagsHidden bool // FS_IOC_GETFLAGS unsupported there
}

func statMeta(t *testing.T, p string) metaState {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatalf("lstat %s: %v", p, err)
	}
	s := metaState{mode: os.FileMode(st.Mode & 0o7777), uid: st.Uid, gid: st.Gid, mtime: st.Mtim.Nano()}
	if sz, err := unix.Llistxattr(p, nil); err == nil && sz > 0 {
		b := make([]byte, sz)
		if n, err := unix.Llistxattr(p, b); err == nil {
			s.xattrs = string(b[:n])
		}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG || st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
			f, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS)
			s.flags, s.flagsHidden = f, err != nil
			unix.Close(fd)
		}
	}
	return s
}

// setfattrShell is setfattr, or python3's os.setxattr where attr is not
// installed (-h, -n NAME -v VALUE, -x NAME).
const setfattrShell = `command -v setfattr >/dev/null || setfattr() {
python3 - "$@" <<'PY'
import os, sys
a, follow, name, value, remove = sys.argv[1:], True, None, b"", False
while len(a) > 1:
    o = a.pop(0)
    if o == "-h": follow = False
    elif o == "-n": name = a.pop(0)
    elif o == "-v": value = a.pop(0).encode()
    elif o == "-x": name, remove = a.pop(0), True
try:
    if remove: os.removexattr(a[0], name, follow_symlinks=follow)
    else: os.setxattr(a[0], name, value, follow_symlinks=follow)
except OSError as e:
    sys.exit("setfattr: %s: %s" % (a[0], e.strerror))
PY
}
`

// metaScript runs every family of metadata change on its arguments
// (python3's os.* for the descriptor forms, ctypes for AT_EMPTY_PATH), each
// allowed to fail, and prints "ALLOWED ..." for each descriptor form that
// succeeded; $1 is a regular file (or a symlink to one), $2 a directory.
const metaScript = setfattrShell + `
f="$1"; d="$2"
chmod 777 "$f"; chmod 700 "$d"
chown "$(id -u):$(id -g)" "$f"; chown 1:1 "$f"; chgrp "$(id -g)" "$d"; chown -h "$(id -u)" "$f"
touch -c -d @981173106 "$f"; touch -c -h -d @981173106 "$d"
python3 -c 'import os,sys; os.utime(sys.argv[1], (1, 1)); os.utime(sys.argv[1], None)' "$f"
setfattr -n user.planted -v 1 "$f"; setfattr -x user.keep "$f"
setfattr -h -n user.planted -v 1 "$d"
chattr +A "$f"; chattr +d "$d"
python3 - "$f" "$d" <<'EOF'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_EMPTY_PATH, AT_SYMLINK_NOFOLLOW = 0x1000, 0x100
def tries(what, f):
    try:
        f()
        print("ALLOWED", what)
    except OSError as e:
        print("refused", what, e.strerror)
def call(rc):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
for path in sys.argv[1:]:
    for flags in (os.O_RDONLY, os.O_PATH, os.O_PATH | os.O_NOFOLLOW):
        if flags & os.O_NOFOLLOW and os.path.islink(path):
            continue  # the symlink itself: the workspace's
        try:
            fd = os.open(path, flags)
        except OSError as e:
            print("cannot open", path, e.strerror)
            continue
        tag = "%s fd%o" % (path, flags)
        tries(tag + " fchmod", lambda: os.chmod(fd, 0o777))
        tries(tag + " fchown", lambda: os.chown(fd, os.getuid(), os.getgid()))
        tries(tag + " fchownat empty", lambda: call(libc.fchownat(fd, b"", os.getuid(), os.getgid(), AT_EMPTY_PATH)))
        tries(tag + " futimens", lambda: os.utime(fd, (2, 2)))
        tries(tag + " utimensat empty", lambda: call(libc.utimensat(fd, b"", None, AT_EMPTY_PATH)))
        tries(tag + " fsetxattr", lambda: os.setxattr(fd, "user.planted", b"1"))
        tries(tag + " fremovexattr", lambda: os.removexattr(fd, "user.keep"))
        tries(tag + " chmod magic link", lambda: os.chmod("/proc/self/fd/%d" % fd, 0o777))
        tries(tag + " setxattr magic link", lambda: os.setxattr("/proc/self/fd/%d" % fd, "user.planted", b"1"))
        tries(tag + " fchmodat2 nofollow", lambda: call(libc.syscall(452, -100, path.encode(), 0o777, AT_SYMLINK_NOFOLLOW)))
        os.close(fd)
EOF
exit 0
`

// TestMetadataOutsideDenied: no change of mode, owner, times, xattrs or
// inode flags reaches a file outside the writable roots — by path, through
// a symlink in the workspace, by descriptor (O_RDONLY, O_PATH,
// AT_EMPTY_PATH, /proc/self/fd) — nor a protected path in the workspace, a
// deny-read secret or a global /proc entry; everything stays as it was, and
// without a mount view each family is reported as a denial fact.
func TestMetadataOutsideDenied(t *testing.T) {
	forEachHostOf(t, metadataHosts, func(t *testing.T, h hostConfig, id identity) {
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				ws, out := id.workspace(t), id.outside(t)
				f, d, secret := filepath.Join(out, "f"), filepath.Join(out, "d"), filepath.Join(out, "secret")
				id.writeOwned(t, f, "outside\n", 0o644)
				id.writeOwned(t, secret, "key\n", 0o600)
				id.writeOwned(t, filepath.Join(ws, ".envrc"), "export X=1\n", 0o644)
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Lchown(d, int(id.uid), int(id.gid)); err != nil {
					t.Fatal(err)
				}
				if err := unix.Setxattr(f, "user.keep", []byte("1"), 0); err != nil {
					t.Skipf("user xattrs unsupported where the outside directory lies: %v", err)
				}
				if err := os.Symlink(f, filepath.Join(ws, "link")); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(d, filepath.Join(ws, "dlink")); err != nil {
					t.Fatal(err)
				}
				paths := []string{f, d, secret, filepath.Join(ws, ".envrc")}
				before := map[string]metaState{}
				for _, p := range paths {
					before[p] = statMeta(t, p)
				}
				script := `
bash -c "$META" meta "$OUT/f" "$OUT/d"
bash -c "$META" meta link dlink
bash -c "$META" meta "$OUT/secret" "$OUT/d"
bash -c "$META" meta .envrc "$OUT/d"
exit 0`
				r := id.run(t, runOpts{
					Wrap:  h.wrap(),
					Flags: sandboxFlags(mode, ws, "--deny-read", secret),
					Argv:  bash(script),
					Env:   []string{"OUT=" + out, "META=" + metaScript},
					Dir:   ws,
				})
				requireExit(t, r, 0)
				for _, p := range paths {
					if got := statMeta(t, p); got != before[p] {
						t.Errorf("%s changed: %+v, was %+v", p, got, before[p])
					}
				}
				for _, l := range lines(r.Stdout) {
					if strings.HasPrefix(l, "ALLOWED") {
						t.Errorf("a metadata change outside the roots succeeded: %s", l)
					}
				}
				if h.mountView() {
					return // the kernel refused them: no facts
				}
				for _, op := range []string{"chmod", "chown", "utimes", "setxattr"} {
					requireDenial(t, r, mode, op, f)
					requireDenial(t, r, mode, op, d)
				}
				requireDenial(t, r, mode, "chattr", f)
				requireDenial(t, r, mode, "chmod", filepath.Join(ws, ".envrc"))
				requireDenial(t, r, mode, "chmod", secret)
			})
		}
	})
}

// TestMetadataProcEntries: root cannot change the mode of a global /proc
// entry (owned by root, global to the host) on any host configuration.
// (TestProcEntryModesUnchanged checks a fresh procfs too.)
func TestMetadataProcEntries(t *testing.T) {
	const entry = "/proc/sys/kernel/hostname"
	forEachHostOf(t, metadataHosts, func(t *testing.T, h hostConfig, id identity) {
		before := statMeta(t, entry)
		ws := id.workspace(t)
		r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags("workspace-write", ws),
			Argv: bash("chmod 0600 " + entry + "; chown 1 " + entry + "; touch -c " + entry + "; exit 0"), Dir: ws})
		requireExit(t, r, 0)
		if got := statMeta(t, entry); got.mode != before.mode || got.uid != before.uid {
			t.Errorf("%s changed: %+v, was %+v", entry, got, before)
			_ = os.Chmod(entry, before.mode)
		}
		if !h.mountView() {
			requireDenial(t, r, "workspace-write", "chmod", entry)
		}
	})
}

// TestMetadataInsideAllowed: everyday work inside the workspace keeps
// working wherever the supervisor performs metadata changes: chmod +x and
// run, touch -d, setfattr, chown to oneself, cp -a, tar x, rsync -a (when
// installed), git checkout of an executable, npm-style utimes by path and
// by descriptor; an allowed chmod is a change fact; a symlink's own owner
// changes (chown -h) without touching its target.
func TestMetadataInsideAllowed(t *testing.T) {
	t.Parallel()
	rsync := "true"
	if _, err := exec.LookPath("rsync"); err == nil {
		rsync = "rsync -a src/ rsyncdst/"
	}
	forEachHostOf(t, metadataHosts, func(t *testing.T, h hostConfig, id identity) {
		ws := id.workspace(t)
		id.writeOwned(t, filepath.Join(ws, "existing"), "e\n", 0o644)
		passwd := statMeta(t, "/etc/passwd")
		script := setfattrShell + `set -ex
printf '#!/bin/sh\necho script-ran\n' > s.sh; chmod +x s.sh; ./s.sh
chmod 755 existing
echo a > t; touch -d @981173106 t; chown "$(id -u):$(id -g)" t
setfattr -n user.x -v 1 t; setfattr -n user.gone -v 1 t; setfattr -x user.gone t
mkdir -p src/d; echo b > src/d/f; chmod 640 src/d/f; chmod 750 src/d; touch -d @1009843200 src/d/f src/d
cp -a src cpdst
tar -C src -cf src.tar . && mkdir tardst && tar -C tardst -xf src.tar
` + rsync + `
git init -q repo; cd repo
printf '#!/bin/sh\n' > run.sh; chmod +x run.sh; git add run.sh
git -c user.name=t -c user.email=t@t.invalid -c commit.gpgsign=false commit -qm x
rm run.sh; git checkout -- run.sh; test -x run.sh; cd ..
python3 -c '
import os
fd = os.open("npm.json", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"{}"); os.utime(fd, (1000, 2000)); os.fchmod(fd, 0o600); os.close(fd)
os.utime("npm.json", ns=(3000000000, 4000000000))
p = os.open("npm.json", os.O_PATH)
os.chmod("/proc/self/fd/%d" % p, 0o640)
'
ln -s /etc/passwd lnk; chown -h "$(id -u):$(id -g)" lnk
`
		r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags("workspace-write", ws), Argv: bash(script), Dir: ws})
		requireExit(t, r, 0)
		requireNoDenials(t, r)
		if !strings.Contains(r.Stdout, "script-ran") {
			t.Errorf("the chmod +x script did not run: %q", r.Stdout)
		}
		wantMode := func(p string, m os.FileMode) {
			t.Helper()
			if got := statMeta(t, filepath.Join(ws, p)).mode; got != m {
				t.Errorf("%s: mode %o, want %o", p, got, m)
			}
		}
		wantTime := func(p string, tm time.Time) {
			t.Helper()
			if got := statMeta(t, filepath.Join(ws, p)).mtime; got != tm.UnixNano() {
				t.Errorf("%s: mtime %v, want %v", p, time.Unix(0, got), tm)
			}
		}
		d2002 := time.Unix(1009843200, 0)
		wantMode("s.sh", 0o755)
		wantMode("existing", 0o755)
		wantTime("t", time.Unix(981173106, 0))
		if got := statMeta(t, filepath.Join(ws, "t")).xattrs; got != "user.x\x00" {
			t.Errorf("t: xattrs %q, want user.x only", got)
		}
		dsts := []string{"cpdst", "tardst"}
		if rsync != "true" {
			dsts = append(dsts, "rsyncdst")
		}
		for _, dst := range dsts {
			wantMode(dst+"/d", 0o750)
			wantMode(dst+"/d/f", 0o640)
			wantTime(dst+"/d/f", d2002)
			wantTime(dst+"/d", d2002)
		}
		wantMode("repo/run.sh", 0o755)
		wantMode("npm.json", 0o640)
		wantTime("npm.json", time.Unix(4, 0))
		if got := statMeta(t, "/etc/passwd"); got != passwd {
			t.Errorf("/etc/passwd changed through a symlink's chown -h: %+v, was %+v", got, passwd)
		}
		rep := requireReport(t, r)
		found := false
		for _, c := range rep.Changes {
			if c.Path == filepath.Join(ws, "existing") {
				found = c.Op == "mode"
			}
		}
		if !found {
			t.Errorf("the chmod of an existing file is no \"mode\" change: %+v", rep.Changes)
		}
	})
}

// TestMetadataReadOnlyMode: in read-only mode the workspace is no writable
// root: its files' metadata is refused like any other.
func TestMetadataReadOnlyMode(t *testing.T) {
	forEachHostOf(t, metadataHosts, func(t *testing.T, h hostConfig, id identity) {
		ws := id.workspace(t)
		f := filepath.Join(ws, "f")
		id.writeOwned(t, f, "f\n", 0o644)
		before := statMeta(t, f)
		r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags("read-only", ws), Argv: bash("chmod +x f || exit 3"), Dir: ws})
		requireExit(t, r, 3)
		if got := statMeta(t, f); got != before {
			t.Errorf("%s changed in read-only mode: %+v, was %+v", f, got, before)
		}
		if !h.mountView() {
			requireDenial(t, r, "read-only", "chmod", f)
		}
	})
}

// TestMetadataNoViewMissing: the report names metadata-writes missing only
// where nothing covers them: never with a mount view or a supervisor.
func TestMetadataNoViewMissing(t *testing.T) {
	forEachHostOf(t, metadataHosts, func(t *testing.T, h hostConfig, id identity) {
		ws := id.workspace(t)
		r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags("workspace-write", ws), Argv: bash("true"), Dir: ws})
		requireExit(t, r, 0)
		if rep := requireReport(t, r); contains(rep.Enforcement.Missing, "metadata-writes") {
			t.Errorf("metadata-writes reported missing with a supervisor: %v", rep.Enforcement.Missing)
		}
	})
}
