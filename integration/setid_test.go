//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// setIDScript tries every way a command has to leave a set-user-ID or
// set-group-ID file in the workspace, each in a line that goes on after a
// refusal, and prints what it saw. $ARCHIVE is a tar holding a set-user-ID
// executable (made outside the sandbox).
const setIDScript = `
cp /bin/true chmod && chmod 4755 chmod; echo "chmod $?"
cp /bin/true symbolic && chmod u+s,g+s symbolic; echo "symbolic $?"
install -m 4755 /bin/true install; echo "install $?"
python3 -c 'import os; f = os.open("fchmod", os.O_CREAT | os.O_WRONLY, 0o755); os.fchmod(f, 0o6755)'; echo "fchmod $?"
python3 -c 'import os; os.open("create", os.O_CREAT | os.O_WRONLY, 0o4755)' 2>/dev/null; echo "create $?"
python3 -c 'import os; os.mknod("mknod", 0o104755)' 2>/dev/null; echo "mknod $?"
python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
how = (ctypes.c_uint64 * 3)(os.O_CREAT | os.O_WRONLY, 0o4755, 0)
fd = libc.syscall(ctypes.c_long(437), ctypes.c_long(-100), ctypes.c_char_p(b"openat2"), how, ctypes.c_size_t(24))
print("openat2", os.strerror(ctypes.get_errno()) if fd < 0 else "created")'
tar xpf "$ARCHIVE"; echo "tar $?"
mkdir dir && chmod g+s dir; echo "dir $?"
`

// TestSetIDNeverApplied: no way a command has leaves a set-ID file in the
// workspace (as root, a set-user-ID-root executable anyone could run
// later): a change of mode goes through without the bits, a creation with
// them is refused, openat2 (whose mode the filter cannot see) answers
// ENOSYS, each with a fact; a directory keeps its set-group-ID bit. On
// every host with a supervisor, as root and as a user.
func TestSetIDNeverApplied(t *testing.T) {
	forEachHostOf(t, supervisedHosts, func(t *testing.T, h hostConfig, id identity) {
		wrap := h.wrap()
		ws := id.workspace(t)
		out := id.outside(t)
		archive := filepath.Join(out, "suid.tar")
		src := filepath.Join(out, "src")
		if err := os.Mkdir(src, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := exec.Command("cp", "/bin/true", filepath.Join(src, "fromtar")).Run(); err != nil {
			t.Fatalf("cp: %v", err)
		}
		if err := os.Chmod(filepath.Join(src, "fromtar"), 0o4755|os.ModeSetuid); err != nil {
			t.Fatal(err)
		}
		if err := exec.Command("tar", "cf", archive, "-C", src, "fromtar").Run(); err != nil {
			t.Fatalf("tar: %v", err)
		}
		if err := exec.Command("chown", "-R", id.username, out).Run(); err != nil {
			t.Fatalf("chown: %v", err)
		}

		r := id.run(t, runOpts{Wrap: wrap, Flags: sandboxFlags("workspace-write", ws), Argv: bash(setIDScript),
			Env: []string{"ARCHIVE=" + archive}, Dir: ws})
		requireExit(t, r, 0)
		for _, want := range []string{"chmod 0", "symbolic 0", "install 0", "fchmod 0", "create 1", "mknod 1",
			"openat2 Function not implemented", "tar 0", "dir 0"} {
			if !strings.Contains(r.Stdout, want+"\n") {
				t.Errorf("stdout lacks %q: %v", want+"\n", r)
			}
		}
		// The world afterwards: no set-ID file anywhere in the
		// workspace; the files that went through are there, plain.
		err := filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			m := fi.Mode()
			if fi.IsDir() {
				if m&os.ModeSetuid != 0 {
					t.Errorf("%s: directory %v has the set-user-ID bit", p, m)
				}
				return nil
			}
			if m&(os.ModeSetuid|os.ModeSetgid) != 0 {
				t.Errorf("%s: %v has a set-ID bit", p, m)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walking the workspace: %v", err)
		}
		for _, f := range []string{"chmod", "symbolic", "install", "fchmod", "fromtar"} {
			fi, err := os.Stat(filepath.Join(ws, f))
			if err != nil {
				t.Errorf("%s: %v", f, err)
			} else if m := fi.Mode().Perm() | fi.Mode()&(os.ModeSetuid|os.ModeSetgid); m != 0o755 {
				t.Errorf("%s: mode %v, want %v", f, m, os.FileMode(0o755))
			}
		}
		requireAbsent(t, filepath.Join(ws, "create"))
		requireAbsent(t, filepath.Join(ws, "mknod"))
		requireAbsent(t, filepath.Join(ws, "openat2"))
		fi, err := os.Stat(filepath.Join(ws, "dir"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSetgid == 0 {
			t.Errorf("dir: mode %v: a directory keeps its set-group-ID bit", fi.Mode())
		}
		rep := requireReport(t, r)
		n := 0
		for _, dn := range rep.Denials {
			if dn.Op == "chmod" && strings.Contains(dn.Reason, "set-ID") {
				n++
			}
		}
		if n < 6 {
			t.Errorf("%d set-ID facts, want at least 6, a fact for each set-ID change or creation: %+v", n, rep.Denials)
		}
	})
}
