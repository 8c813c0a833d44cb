//go:build linux

package audit

import (
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// asUser makes the calling test run as an unprivileged user, the way the
// audit runs for one: root reads every directory whatever its mode, so what
// an unreadable directory does is only seen without it. Run by root, it
// runs the test again in a copy of the test binary as $DSH_TEST_USER
// (default dshtest) — prepare, run here as root first, gets a directory
// owned by that user to set up and the child finds it in userDir — and
// returns false: the child's result is the test's. Run by anyone else, it
// returns true: run the test here.
func asUser(t *testing.T, prepare func(dir string, uid, gid int)) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return true
	}
	name := os.Getenv("DSH_TEST_USER")
	if name == "" {
		name = "dshtest"
	}
	u, err := user.Lookup(name)
	if err != nil {
		if os.Getenv("DSH_TEST_USER") != "" || os.Getenv("CI") == "true" {
			t.Fatalf("test user %q: %v", name, err)
		}
		t.Skipf("!!! test user %q not found (%v): this test needs an unprivileged user (useradd -m %s)", name, err, name)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	bin, err := os.MkdirTemp("", "audit-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { forceRemoveAll(bin) })
	dir := filepath.Join(bin, "dir")
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(dir, uid, gid)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, exe, filepath.Join(bin, "audit.test"))
	cmd := exec.Command(filepath.Join(bin, "audit.test"), "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "HOME=/nonexistent", "TMPDIR=/tmp", "AUDIT_TEST_DIR="+dir)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	t.Logf("as %s:\n%s", name, out)
	if err != nil {
		t.Fatalf("as %s: %v", name, err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("as %s: the test did not pass", name)
	}
	return false
}

// userDir is the directory asUser's prepare set up, in the child ("" when
// there is none).
func userDir() string { return os.Getenv("AUDIT_TEST_DIR") }

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// forceRemoveAll removes a tree even where a test left directories without
// permissions.
func forceRemoveAll(d string) {
	var open func(string)
	open = func(p string) {
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			return
		}
		_ = os.Chmod(p, 0o755) // (before reading it)
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			open(filepath.Join(p, e.Name()))
		}
	}
	open(d)
	_ = os.RemoveAll(d)
}
