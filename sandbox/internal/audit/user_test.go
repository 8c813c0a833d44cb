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

	"github.com/stretchr/testify/require"
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
	if err != nil && os.Getenv("DSH_TEST_USER") == "" && os.Getenv("CI") != "true" {
		t.Skipf("!!! test user %q not found (%v): this test needs an unprivileged user (useradd -m %s)", name, err, name)
	}
	require.NoError(t, err, "test user %q", name)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	bin, err := os.MkdirTemp("", "audit-test-")
	require.NoError(t, err)
	t.Cleanup(func() { forceRemoveAll(bin) })
	dir := filepath.Join(bin, "dir")
	require.NoError(t, os.Chmod(bin, 0o755))
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chown(dir, uid, gid))
	if prepare != nil {
		prepare(dir, uid, gid)
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	copyFile(t, exe, filepath.Join(bin, "audit.test"))
	cmd := exec.Command(filepath.Join(bin, "audit.test"), "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "HOME=/nonexistent", "TMPDIR=/tmp", "AUDIT_TEST_DIR="+dir)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	t.Logf("as %s:\n%s", name, out)
	require.NoError(t, err, "as %s", name)
	require.Truef(t, strings.Contains(string(out), "--- PASS: "+t.Name()), "as %s: the test did not pass", name)
	return false
}

// userDir is the directory asUser's prepare set up, in the child ("" when
// there is none).
func userDir() string { return os.Getenv("AUDIT_TEST_DIR") }

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
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
