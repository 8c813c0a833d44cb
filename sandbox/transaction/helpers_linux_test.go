package transaction

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain keeps the tests' transaction key away from the user's own.
func TestMain(m *testing.M) {
	state, err := os.MkdirTemp("", "dshtx-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_STATE_HOME", state)
	code := m.Run()
	os.RemoveAll(state)
	os.Exit(code)
}

// removeTree removes a test's tree, whatever modes a command left in it.
func removeTree(path string) {
	_ = filepath.Walk(path, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(path)
}

// mounter is an identity that mounts the test overlays: root (with
// unshare -m) or an unprivileged user (with unshare -Urm, through su when
// the tests run as root).
type mounter struct {
	name     string
	uid, gid int
	suUser   string // set when the tests, as root, run the command as this user
	// trusted mounts without userxattr, so overlay uses trusted.* xattrs.
	trusted bool
}

// mounters lists the identities to run overlay tests as: root when the
// tests run as root, plus DSH_TEST_USER when set; the current user
// otherwise.
func mounters(t *testing.T) []mounter {
	t.Helper()
	if os.Geteuid() != 0 {
		return []mounter{{name: "self", uid: os.Geteuid(), gid: os.Getegid()}}
	}
	list := []mounter{{name: "root"}, {name: "root-trusted-xattrs", trusted: true}}
	if name := os.Getenv("DSH_TEST_USER"); name != "" {
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatalf("DSH_TEST_USER=%s: %v", name, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		list = append(list, mounter{name: "user", uid: uid, gid: gid, suUser: name})
	}
	return list
}

// forEachMounter runs f as a subtest for each mounter.
func forEachMounter(t *testing.T, f func(t *testing.T, env *testEnv)) {
	for _, m := range mounters(t) {
		t.Run(m.name, func(t *testing.T) {
			f(t, newTestEnv(t, m))
		})
	}
}

// testEnv is a base directory holding a workspace (ws) and a transaction
// directory (tx), all owned by the mounter.
type testEnv struct {
	m       mounter
	base    string
	ws      string
	txDir   string
	scripts int
}

func newTestEnv(t *testing.T, m mounter) *testEnv {
	t.Helper()
	return newTestEnvIn(t, m, "", "")
}

// newTestEnvIn makes the workspace under wsParent and the transaction
// directory under txParent ("" for the temporary directory).
func newTestEnvIn(t *testing.T, m mounter, wsParent, txParent string) *testEnv {
	t.Helper()
	base, err := os.MkdirTemp(wsParent, "dshtx-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(base) })
	txBase := base
	if txParent != "" {
		if txBase, err = os.MkdirTemp(txParent, "dshtx-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeTree(txBase) })
	}
	env := &testEnv{m: m, base: base, ws: filepath.Join(base, "ws"), txDir: filepath.Join(txBase, "tx")}
	if err := os.Mkdir(env.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{base, txBase} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env.chown(t, base)
	env.chown(t, txBase)
	return env
}

// chown gives the tree at path to the mounter (a no-op for root).
func (e *testEnv) chown(t *testing.T, path string) {
	t.Helper()
	if e.m.suUser == "" {
		return
	}
	err := filepath.Walk(path, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, e.m.uid, e.m.gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// writeFiles creates files in the workspace: a name ending in "/" is a
// directory, a value starting with "->" a symlink.
func (e *testEnv) writeFiles(t *testing.T, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(e.ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(p, 0o755)
		case strings.HasPrefix(content, "->"):
			err = os.Symlink(strings.TrimPrefix(content, "->"), p)
		default:
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	e.chown(t, e.ws)
}

// create makes the transaction and gives its directory to the mounter.
func (e *testEnv) create(t *testing.T) *Tx {
	t.Helper()
	tx, err := Create(e.txDir, e.ws)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if e.m.suUser != "" {
		e.chown(t, e.txDir)
		reseal(t, tx)
	}
	return tx
}

// reseal seals the upper layer as it is now (after the test changed its
// owner, which the sandbox never does).
func reseal(t *testing.T, tx *Tx) {
	t.Helper()
	s, err := tx.begin()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	fd, err := s.openUpper()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	list, err := sealUpper(fd)
	if err == nil {
		err = s.save(s.doc.State, list, false)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// treeScript prints one line per entry of the current directory's tree:
// path, type, mode and content hash or symlink target. The same script
// lists the tree inside the overlay and on the host, so both are compared
// on equal terms.
const treeScript = `find . -mindepth 1 -printf '%p %y %m %l\n' | LC_ALL=C sort
find . -mindepth 1 -type f -print0 | xargs -0 -r sha256sum | LC_ALL=C sort -k2`

const treeMarker = "=== tree ==="

// runInOverlay mounts the transaction's overlay on the workspace in a new
// mount namespace as the mounter, runs script in the workspace, and
// returns the tree listing seen through the overlay afterwards. It holds
// the transaction meanwhile and seals what the script did, as the sandbox
// does for a command.
func (e *testEnv) runInOverlay(t *testing.T, tx *Tx, script string) string {
	t.Helper()
	hold, err := tx.Hold()
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}
	defer func() {
		if err := hold.Release(); err != nil {
			t.Errorf("Release: %v", err)
		}
	}()
	e.scripts++
	scriptPath := filepath.Join(e.base, fmt.Sprintf("script-%d.sh", e.scripts))
	full := fmt.Sprintf(`set -e
export HOME=%[5]s GIT_CONFIG_NOSYSTEM=1
mount -t overlay overlay -o lowerdir=%[1]s,upperdir=%[2]s,workdir=%[3]s,%[8]s %[1]s || { echo "overlay mount failed" >&2; exit 97; }
cd %[1]s
%[4]s
echo '%[6]s'
%[7]s
`, e.ws, tx.UpperDir(), tx.WorkDir(), script, e.base, treeMarker, treeScript, e.mountOptions())
	if err := os.WriteFile(scriptPath, []byte(full), 0o644); err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	switch {
	case e.m.suUser != "":
		cmd = exec.Command("su", "-s", "/bin/sh", e.m.suUser, "-c", "unshare -Urm sh "+scriptPath)
	case os.Geteuid() == 0:
		cmd = exec.Command("unshare", "-m", "sh", scriptPath)
	default:
		cmd = exec.Command("unshare", "-Urm", "sh", scriptPath)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exitErr *exec.ExitError
	if err != nil {
		refused := strings.Contains(stderr.String(), "unshare failed") ||
			(errors.As(err, &exitErr) && exitErr.ExitCode() == 97)
		if refused {
			kernelRefused(t, fmt.Sprintf("overlay mount as %s refused: %v: %s", e.m.name, err, stderr.String()))
		}
		t.Fatalf("command in overlay failed: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	_, tree, found := strings.Cut(stdout.String(), treeMarker+"\n")
	if !found {
		t.Fatalf("no tree listing in output: %s", stdout.String())
	}
	return tree
}

func (e *testEnv) mountOptions() string {
	if e.m.trusted {
		return "redirect_dir=off,metacopy=off"
	}
	return "userxattr"
}

// kernelRefused skips a test the kernel cannot support here, or fails it
// when the environment requires the sandbox's kernel features
// (DSH_REQUIRE_LANDLOCK set, as in CI): CI must never skip silently.
func kernelRefused(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("DSH_REQUIRE_LANDLOCK") != "" {
		t.Fatalf("%s (DSH_REQUIRE_LANDLOCK is set, so this fails instead of skipping)", reason)
	}
	t.Skip(reason)
}

// hostTree lists the workspace on the host with treeScript.
func (e *testEnv) hostTree(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", treeScript)
	cmd.Dir = e.ws
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("list workspace: %v", err)
	}
	return string(out)
}

// scenarioFiles and scenarioScript exercise every kind of upper entry:
// copy-ups, new files and directories, whiteouts of files and
// directories, an opaque directory replacing one with contents, a mode
// change, symlinks, a directory replaced by a file and a file by a
// directory.
var scenarioFiles = map[string]string{
	"mod.txt":          "one\ntwo\nthree\n",
	"del.txt":          "delete me\n",
	"keep.txt":         "unchanged\n",
	"modeonly.sh":      "#!/bin/sh\necho hi\n",
	"d/a":              "a\n",
	"d/sub/b":          "b\n",
	"opq/x":            "x\n",
	"opq/old/y":        "y\n",
	"sub/inner.txt":    "inner\n",
	"sub/deep/more":    "more\n",
	"link":             "->mod.txt",
	"dir2file/f":       "f\n",
	"file2dir":         "plain\n",
	"ro/readonly.txt":  "r\n",
	"empty/":           "",
	"renamed-from.txt": "moving\n",
}

const scenarioScript = `
echo four >> mod.txt
rm del.txt
chmod 755 modeonly.sh
rm -rf d
rm -rf opq && mkdir opq && echo new > opq/new && mkdir opq/nested && echo n > opq/nested/n
mkdir -p newdir/inner && echo z > newdir/z && echo deep > newdir/inner/deep
ln -s keep.txt newlink
rm link && ln -s keep.txt link
echo added > sub/added
echo changed > sub/deep/more
rm -rf dir2file && echo nowfile > dir2file
rm file2dir && mkdir file2dir && echo inside > file2dir/in
echo w >> ro/readonly.txt && chmod 555 ro
chmod 700 empty
mv renamed-from.txt renamed-to.txt
mkfifo fifo
`

type syscallStat = syscall.Stat_t
