//go:build linux

package integration

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

// treeHash is a digest of everything under dir: every path with its type,
// permission bits, size and content (a symlink's target), so that two trees
// hash alike only when they are byte-identical.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", rel, fi.Mode())
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatalf("hashing %s: %v", dir, err)
	}
	sort.Strings(lines)
	return fmt.Sprintf("%x", sha256.Sum256([]byte(strings.Join(lines, "\n"))))
}

// requireTreeUnchanged checks that dir's treeHash is still before (why
// says what that means), like the package's other require helpers without
// ending the test.
func requireTreeUnchanged(t *testing.T, dir, before, why string) {
	t.Helper()
	if got := treeHash(t, dir); got != before {
		t.Errorf("%s changed (tree hash %s, want %s): %s", dir, got, before, why)
	}
}

// listing prints every path under the working directory with its type, mode
// and (but for a directory, whose size is its filesystem's) size, sorted.
const listing = `find . \( -type d -printf '%P %y %m\n' \) -o -printf '%P %y %m %s\n' | sort`

// txEnv is a workspace with a few files and a transaction directory (not
// made yet) outside every writable root (a transaction directory in one is
// refused: transaction_hardening_test.go).
type txEnv struct {
	fsEnv
	tx string
}

func newTxEnv(t *testing.T, id identity) txEnv {
	t.Helper()
	e := txEnv{fsEnv: newFSEnv(t, id, "workspace-write")}
	// The workspace lies outside every other writable root (not in /tmp):
	// its rights come from the Landlock rule the runner adds on the
	// overlay, which a workspace in /tmp would not need.
	e.ws = id.mkdirOwned(t, "/var/tmp", "dsh-it-ws-")
	e.tx = filepath.Join(id.mkdirOwned(t, "/var/tmp", "dsh-it-tx-"), "tx")
	if err := os.MkdirAll(filepath.Join(e.ws, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(e.ws, "src"), int(id.uid), int(id.gid)); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"keep": "one\ntwo\nthree\n", "gone": "x\n", "src/a.go": "package a\n", "src/b.go": "package b\n", "run.sh": "#!/bin/sh\n"} {
		id.writeOwned(t, filepath.Join(e.ws, name), content, 0o644)
	}
	return e
}

// run runs script in the transaction (on a host without one: see
// skipWithoutOverlay).
func (e txEnv) run(t *testing.T, script string) result {
	t.Helper()
	skipWithoutOverlay(t, e.id, e.ws, e.tx)
	return e.fsEnv.run(t, script, "--transaction", e.tx)
}

// skipWithoutOverlay: on a simulated host without a mount view there is no
// overlay, and a command in a transaction is refused before anything runs
// (docs/DESIGN.md, Transactions; TestTransactionUnavailable). It runs one
// such command in workspace ws with transaction directory tx, asserts the
// refusal — exit 125, one line saying "transaction unavailable", the
// workspace untouched, no transaction directory left — and skips the rest
// of the test, whose subject is the transaction. Elsewhere it does nothing.
func skipWithoutOverlay(t *testing.T, id identity, ws, tx string) {
	t.Helper()
	if !simulatedHostLacks("mount-view") {
		return
	}
	before := treeHash(t, ws)
	r := id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws, "--transaction", tx), Argv: bash("echo x > direct"), Dir: ws})
	requireSetupRefused(t, r)
	if !strings.Contains(r.Stderr, "transaction unavailable") {
		t.Errorf("stderr = %q, want the transaction refused as unavailable", r.Stderr)
	}
	requireAbsent(t, filepath.Join(ws, "direct"))
	requireTreeUnchanged(t, ws, before, "a refused command changes nothing")
	requireAbsent(t, tx)
	if t.Failed() {
		t.FailNow()
	}
	skipOnSimulatedHost(t, "no mount view, so no overlay: a command in a transaction is refused before it runs (exit 125, asserted); the rest of this test needs one")
}

// cli runs `dsh-sandbox-run ARGS` (commit, discard, diff, changes) as the
// identity.
func (e txEnv) cli(t *testing.T, args ...string) result {
	t.Helper()
	return e.id.run(t, runOpts{Flags: args, NoReport: true})
}

// TestTransactionCommit: a command in a transaction changes nothing in the
// workspace; the report and `changes` list what it did, `diff` shows it, a
// second command sees the first's changes, and `commit` makes the
// workspace what the commands saw — as root and as an unprivileged user.
func TestTransactionCommit(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newTxEnv(t, id)
		before := treeHash(t, e.ws)
		r := e.run(t, strings.Join([]string{
			"set -e",
			"echo four >> keep",
			"rm gone",
			"echo new > new",
			"mkdir -p d/e && printf 12345 > d/e/f",
			"chmod 755 run.sh",
			"ln -s keep link",
		}, "\n"))
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		requireTreeUnchanged(t, e.ws, before, "the workspace must not change before commit")
		rep := requireReport(t, r)
		if rep.Transaction != e.tx {
			t.Errorf("report transaction = %q, want %q", rep.Transaction, e.tx)
		}
		p := func(n string) string { return filepath.Join(e.ws, n) }
		want := []Change{
			{Op: "created", Path: p("d"), Type: "dir", Mode: "0755"},
			{Op: "created", Path: p("d/e"), Type: "dir", Mode: "0755"},
			{Op: "created", Path: p("d/e/f"), Type: "file", Size: 5, Mode: "0644"},
			{Op: "removed", Path: p("gone")},
			{Op: "modified", Path: p("keep"), Type: "file", Size: 19, Mode: "0644"},
			{Op: "created", Path: p("link"), Type: "symlink", Mode: "0777"},
			{Op: "created", Path: p("new"), Type: "file", Size: 4, Mode: "0644"},
			{Op: "mode", Path: p("run.sh"), Type: "file", Size: 10, Mode: "0755"},
		}
		for i := range want {
			want[i].Root = e.ws // a transaction's changes are the workspace's
		}
		if !reflect.DeepEqual(rep.Changes, want) {
			t.Errorf("report changes = %+v\nwant %+v", rep.Changes, want)
		}

		// The second command sees the first one's work; its listing of the
		// workspace is what commit must produce.
		r = e.run(t, `cat new d/e/f && test ! -e gone`)
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		if r.Stdout != "new\n12345" {
			t.Errorf("stdout = %q, want %q", r.Stdout, "new\n12345")
		}
		r = e.run(t, listing)
		if r.Exit != 0 {
			t.Fatalf("listing: exit = %d, want 0 (%v)", r.Exit, r)
		}
		seen := r.Stdout
		// Read-only in the transaction sees its changes and makes none.
		r = id.run(t, runOpts{Flags: sandboxFlags("read-only", e.ws, "--transaction", e.tx), Argv: bash("cat new; echo x > ro"), Dir: e.ws})
		if r.Exit != 1 {
			t.Errorf("read-only: exit = %d, want 1 (%v)", r.Exit, r)
		}
		if r.Stdout != "new\n" {
			t.Errorf("read-only: stdout = %q, want %q", r.Stdout, "new\n")
		}
		requireDenial(t, r, "read-only", "write", p("ro"))
		requireAbsent(t, filepath.Join(e.tx, "upper", "ro"))

		c := e.cli(t, "changes", e.tx)
		if c.Exit != 0 {
			t.Fatalf("changes: exit = %d, want 0 (%v)", c.Exit, c)
		}
		var listed []Change
		if err := json.Unmarshal([]byte(c.Stdout), &listed); err != nil {
			t.Fatalf("changes: %v: %s", err, c.Stdout)
		}
		for i := range want {
			want[i].Root = "" // the transaction's listing is the workspace's alone
		}
		if !reflect.DeepEqual(listed, want) {
			t.Errorf("changes lists %+v\nwant %+v", listed, want)
		}

		d := e.cli(t, "diff", e.tx)
		if d.Exit != 0 {
			t.Fatalf("diff: exit = %d, want 0 (%v)", d.Exit, d)
		}
		for _, s := range []string{"--- a/keep\n+++ b/keep\n@@ -1,3 +1,4 @@\n one\n two\n three\n+four\n", "--- a/gone\n+++ /dev/null\n"} {
			if !strings.Contains(d.Stdout, s) {
				t.Errorf("diff lacks %q: %q", s, d.Stdout)
			}
		}
		requireTreeUnchanged(t, e.ws, before, "changes and diff only read")

		c = e.cli(t, "commit", e.tx)
		if c.Exit != 0 {
			t.Fatalf("commit: exit = %d, want 0 (%v)", c.Exit, c)
		}
		out, err := exec.Command("sh", "-c", `cd "$1" && `+listing, "sh", e.ws).Output()
		if err != nil {
			t.Fatalf("listing the workspace: %v", err)
		}
		if string(out) != seen {
			t.Errorf("the workspace is not what the commands saw: listing\n%s\nwant\n%s", out, seen)
		}
		if got := readFile(t, p("keep")); got != "one\ntwo\nthree\nfour\n" {
			t.Errorf("keep = %q, want %q", got, "one\ntwo\nthree\nfour\n")
		}
		requireAbsent(t, p("gone"))

		// Committed: no second commit, no more commands in it.
		c = e.cli(t, "commit", e.tx)
		if c.Exit != 125 {
			t.Errorf("second commit: exit = %d, want 125 (%v)", c.Exit, c)
		}
		if !strings.Contains(c.Stderr, "committed") {
			t.Errorf("second commit: stderr lacks %q: %q", "committed", c.Stderr)
		}
		r = e.run(t, "echo late > late")
		if r.Exit != 125 {
			t.Errorf("a command after commit: exit = %d, want 125 (%v)", r.Exit, r)
		}
		requireAbsent(t, p("late"))
	})
}

// TestTransactionDiscard: `rm -rf` of a tree in a transaction, then
// discard: the workspace is byte-identical throughout, and the
// transaction's layers are gone.
func TestTransactionDiscard(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newTxEnv(t, id)
		before := treeHash(t, e.ws)
		r := e.run(t, "rm -rf src && test ! -e src && echo gone")
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		if r.Stdout != "gone\n" {
			t.Errorf("stdout = %q, want %q", r.Stdout, "gone\n")
		}
		rep := requireReport(t, r)
		if want := []Change{{Op: "removed", Path: filepath.Join(e.ws, "src"), Root: e.ws}}; !reflect.DeepEqual(rep.Changes, want) {
			t.Errorf("report changes = %+v, want %+v", rep.Changes, want)
		}
		requireTreeUnchanged(t, e.ws, before, "a command in a transaction changes nothing in the workspace")
		c := e.cli(t, "discard", e.tx)
		if c.Exit != 0 {
			t.Fatalf("discard: exit = %d, want 0 (%v)", c.Exit, c)
		}
		requireTreeUnchanged(t, e.ws, before, "discard applies nothing")
		requireAbsent(t, filepath.Join(e.tx, "upper"))
		requireAbsent(t, filepath.Join(e.tx, "work"))
	})
}

// TestTransactionConflict: the workspace changed where the transaction did
// since the transaction started: commit refuses (exit 1) and changes
// nothing; the transaction can still be discarded.
func TestTransactionConflict(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newTxEnv(t, id)
		r := e.run(t, "echo mine >> keep && echo new > new")
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		id.writeOwned(t, filepath.Join(e.ws, "keep"), "theirs\n", 0o644) // a concurrent edit
		before := treeHash(t, e.ws)
		c := e.cli(t, "commit", e.tx)
		if c.Exit != 1 {
			t.Errorf("commit: exit = %d, want 1 (%v)", c.Exit, c)
		}
		if want := filepath.Join(e.ws, "keep"); !strings.Contains(c.Stderr, want) {
			t.Errorf("commit: stderr lacks %q: %q", want, c.Stderr)
		}
		requireTreeUnchanged(t, e.ws, before, "a refused commit applies nothing")
		requireAbsent(t, filepath.Join(e.ws, "new"))
		if got := readFile(t, filepath.Join(e.ws, "keep")); got != "theirs\n" {
			t.Errorf("keep = %q, want %q", got, "theirs\n")
		}
		c = e.cli(t, "discard", e.tx)
		if c.Exit != 0 {
			t.Fatalf("discard: exit = %d, want 0 (%v)", c.Exit, c)
		}
		requireTreeUnchanged(t, e.ws, before, "discard applies nothing")
	})
}

// TestTransactionGuarantees: the policy holds inside a transaction. A
// protected path stays read-only, a write outside the roots is denied, and
// the transaction's own directory is hidden, so nothing reaches its upper
// layer but through the overlay.
func TestTransactionGuarantees(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newTxEnv(t, id)
		if err := os.MkdirAll(filepath.Join(e.ws, ".git/hooks"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", id.uid, id.gid), filepath.Join(e.ws, ".git")).Run(); err != nil {
			t.Fatalf("chown: %v", err)
		}
		before := treeHash(t, e.ws)
		// The first command makes the transaction, the second tries to
		// reach its directory.
		r := e.run(t, "echo ok > fine")
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		r = e.run(t, strings.Join([]string{
			"echo evil > .git/hooks/pre-commit",
			"echo evil > $OUT/escaped",
			"ls -A " + e.tx,
			"echo evil > " + e.tx + "/upper/planted",
			"mkdir -p " + e.tx + "/upper/.git/hooks && echo evil > " + e.tx + "/upper/.git/hooks/post-checkout",
			"true",
		}, "\n"))
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		if s := strings.TrimSpace(r.Stdout); s != "" {
			t.Errorf("stdout = %q, want nothing: the transaction's directory looks empty inside", s)
		}
		requireDenial(t, r, "workspace-write", "write", filepath.Join(e.ws, ".git/hooks/pre-commit"))
		requireAbsent(t, filepath.Join(e.out, "escaped"))
		for _, p := range []string{"planted", ".git/hooks/post-checkout", ".git/hooks/pre-commit"} {
			requireAbsent(t, filepath.Join(e.tx, "upper", p))
		}
		requireTreeUnchanged(t, e.ws, before, "a command in a transaction changes nothing in the workspace")
		c := e.cli(t, "commit", e.tx)
		if c.Exit != 0 {
			t.Fatalf("commit: exit = %d, want 0 (%v)", c.Exit, c)
		}
		requireAbsent(t, filepath.Join(e.ws, ".git/hooks/pre-commit"))
		if got := readFile(t, filepath.Join(e.ws, "fine")); got != "ok\n" {
			t.Errorf("fine = %q, want %q", got, "ok\n")
		}
	})
}

// TestTransactionGit: `git commit` inside a transaction, then commit: the
// repository is consistent (git fsck) and holds the commit.
func TestTransactionGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newTxEnv(t, id)
		git := func(args ...string) string {
			t.Helper()
			cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "safe.directory=*", "-C", e.ws}, args...)...)
			cmd.SysProcAttr = id.sysProcAttr()
			cmd.Env = id.env()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("git %v: %v: %s", args, err, out)
			}
			return string(out)
		}
		git("init", "-q")
		git("add", "-A")
		git("commit", "-q", "-m", "base")
		r := e.run(t, "set -e; echo changed >> keep; echo n > added; git -c user.name=t -c user.email=t@t add -A; git -c user.name=t -c user.email=t@t commit -q -m 'in the transaction'; git log --oneline | wc -l")
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		if r.Stdout != "2\n" {
			t.Errorf("commits seen in the transaction: %q, want %q", r.Stdout, "2\n")
		}
		if log := git("log", "--oneline"); strings.Count(log, "\n") != 1 {
			t.Errorf("the real repository changed before commit: log %q, want one commit", log)
		}
		c := e.cli(t, "commit", e.tx)
		if c.Exit != 0 {
			t.Fatalf("commit: exit = %d, want 0 (%v)", c.Exit, c)
		}
		git("fsck", "--strict")
		if log := git("log", "--format=%s"); !strings.Contains(log, "in the transaction") {
			t.Errorf("git log lacks %q: %q", "in the transaction", log)
		}
		if st := git("status", "--porcelain"); st != "" {
			t.Errorf("git status = %q, want clean", st)
		}
	})
}

// TestTransactionHarnessKilled: the harness (the CLI) is SIGKILLed while
// the command runs in a transaction: the workspace is untouched, and the
// transaction cannot be committed — what the command wrote was never
// sealed (nor audited), so it is refused (exit 1, saying why) — but can be
// discarded.
func TestTransactionHarnessKilled(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newTxEnv(t, id)
		skipWithoutOverlay(t, id, e.ws, e.tx)
		before := treeHash(t, e.ws)
		s := id.start(t, runOpts{
			Flags: sandboxFlags("workspace-write", e.ws, "--transaction", e.tx),
			Argv:  bash("echo partial > partial && echo x >> keep && echo > .m && mv .m marker && sleep 600"),
			Dir:   e.ws,
		})
		// The command can reach nothing outside its roots to signal through:
		// its marker, renamed into place last, appears in the upper layer.
		deadline := time.Now().Add(testtime.Scale(30 * time.Second))
		for !exists(filepath.Join(e.tx, "upper", "marker")) {
			if exitedEarly(s.cmd.Process.Pid) {
				r := s.wait(t, 0)
				t.Fatalf("the CLI ended before the command wrote its marker: %s", r.String())
			}
			if !time.Now().Before(deadline) {
				t.Fatal("the command never wrote its marker")
			}
			time.Sleep(20 * time.Millisecond)
		}
		// While a command runs in it, the transaction cannot be committed.
		c := e.cli(t, "commit", e.tx)
		if c.Exit != 125 {
			t.Errorf("commit while a command runs: exit = %d, want 125 (%v)", c.Exit, c)
		}
		if !strings.Contains(c.Stderr, "busy") {
			t.Errorf("commit while a command runs: stderr lacks %q: %q", "busy", c.Stderr)
		}
		if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("killing the CLI: %v", err)
		}
		r := s.wait(t, 0)
		if r.Signal != syscall.SIGKILL {
			t.Errorf("the CLI ended by signal %v, want %v (%v)", r.Signal, syscall.SIGKILL, r)
		}
		requireTreeUnchanged(t, e.ws, before, "the killed command changes nothing in the workspace")
		// The runner's processes end with the harness, and the hold with
		// them; until then the commit is refused, never run under them.
		deadline = time.Now().Add(testtime.Scale(30 * time.Second))
		for {
			c = e.cli(t, "commit", e.tx)
			if c.Exit != 125 || !strings.Contains(c.Stderr, "busy") || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if c.Exit != 1 {
			t.Errorf("commit: exit = %d, want 1 (%v)", c.Exit, c)
		}
		if !strings.Contains(c.Stderr, "did not end under its supervisor") {
			t.Errorf("commit: stderr lacks %q: %q", "did not end under its supervisor", c.Stderr)
		}
		requireTreeUnchanged(t, e.ws, before, "a refused commit applies nothing")
		c = e.cli(t, "discard", e.tx)
		if c.Exit != 0 {
			t.Fatalf("discard: exit = %d, want 0 (%v)", c.Exit, c)
		}
		requireTreeUnchanged(t, e.ws, before, "discard applies nothing")
	})
}

// TestTransactionUnavailable: without user namespaces there is no overlay:
// the command is refused (125, one line), never run writing to the
// workspace directly.
func TestTransactionUnavailable(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newTxEnv(t, id)
		before := treeHash(t, e.ws)
		r := id.run(t, runOpts{
			Wrap:  noUserNSWrap(),
			Flags: sandboxFlags("workspace-write", e.ws, "--transaction", e.tx),
			Argv:  bash("echo x > direct"),
			Dir:   e.ws,
		})
		requireSetupRefused(t, r)
		if !strings.Contains(r.Stderr, "transaction unavailable") {
			t.Errorf("stderr lacks %q: %q", "transaction unavailable", r.Stderr)
		}
		requireAbsent(t, filepath.Join(e.ws, "direct"))
		requireTreeUnchanged(t, e.ws, before, "a refused command changes nothing")
		requireAbsent(t, e.tx) // made for a command that never ran: removed again
	})
}

// TestTransactionUsage: bad uses of a transaction are refused before
// anything runs, each with a line naming the problem.
func TestTransactionUsage(t *testing.T) {
	needCLI(t)
	id := identity{name: "self", uid: uint32(os.Geteuid()), gid: uint32(os.Getegid())}
	e := newTxEnv(t, id)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"danger-full-access", append(sandboxFlags("danger-full-access", e.ws, "--transaction", e.tx), "--", "true"), "--transaction needs a confined mode"},
		{"inside the workspace", append(sandboxFlags("workspace-write", e.ws, "--transaction", filepath.Join(e.ws, "tx")), "--", "true"), "inside"},
		{"commit of nothing", []string{"commit", e.out}, "not a transaction directory"},
		{"commit without a directory", []string{"commit"}, "takes one argument"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := id.run(t, runOpts{Flags: c.args, NoReport: true, Dir: e.ws})
			if r.Exit != 125 {
				t.Errorf("exit = %d, want 125 (%v)", r.Exit, r)
			}
			if !strings.Contains(r.Stderr, c.want) {
				t.Errorf("stderr lacks %q: %q", c.want, r.Stderr)
			}
			if n := strings.Count(r.Stderr, "\n"); n != 1 {
				t.Errorf("%d stderr lines, want 1: %q", n, r.Stderr)
			}
		})
	}
	requireAbsent(t, filepath.Join(e.ws, "tx"))
}

// TestTransactionManyFiles: an install-like run (3,000 files in 60
// packages) in a transaction: the report lists the first 1,000 changes and
// counts the rest, and commit makes the workspace exactly what the command
// saw.
func TestTransactionManyFiles(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newTxEnv(t, id)
		r := e.run(t, `set -e
for i in $(seq 1 60); do
  mkdir -p node_modules/pkg$i/lib
  for j in $(seq 1 50); do echo "module.exports = $i * $j" > node_modules/pkg$i/lib/f$j.js; done
done
rm -rf src`)
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		rep := requireReport(t, r)
		if rep.ChangesDropped == nil {
			t.Fatalf("the report has no changesDropped: %s", trunc(r.ReportRaw))
		}
		// node_modules, 60 packages, 60 lib directories, 3,000 files and src.
		if len(rep.Changes) != 1000 {
			t.Errorf("%d changes listed, want 1000", len(rep.Changes))
		}
		if want := 1 + 60 + 60 + 3000 + 1 - 1000; *rep.ChangesDropped != want {
			t.Errorf("changesDropped = %d, want %d", *rep.ChangesDropped, want)
		}
		r = e.run(t, listing)
		if r.Exit != 0 {
			t.Fatalf("listing: exit = %d, want 0 (%v)", r.Exit, r)
		}
		seen := r.Stdout
		c := e.cli(t, "commit", e.tx)
		if c.Exit != 0 {
			t.Fatalf("commit: exit = %d, want 0 (%v)", c.Exit, c)
		}
		if !strings.Contains(c.Stdout, "3121 applied, 1 removed") {
			t.Errorf("commit: stdout lacks %q: %q", "3121 applied, 1 removed", c.Stdout)
		}
		out, err := exec.Command("sh", "-c", `cd "$1" && `+listing, "sh", e.ws).Output()
		if err != nil {
			t.Fatalf("listing the workspace: %v", err)
		}
		if string(out) != seen {
			t.Errorf("the workspace is not what the command saw: listing\n%s\nwant\n%s", trunc(string(out)), trunc(seen))
		}
	})
}

// exitedEarly reports whether child pid has ended, without reaping it (its
// Wait still collects it).
func exitedEarly(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo != 0
}

// TestTransactionSecrets: a secret in the workspace, hidden by the mount
// view, stays hidden in a transaction (its mask covers the overlay's path),
// cannot be replaced there, and is as it was after commit.
func TestTransactionSecrets(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newTxEnv(t, id)
		skipWithoutOverlay(t, id, e.ws, e.tx)
		secret := filepath.Join(e.ws, "secret.env")
		id.writeOwned(t, secret, "TOKEN=hunter2\n", 0o600)
		r := e.fsEnv.run(t, "cat secret.env; echo stolen > secret.env; rm -f secret.env; echo ok > other", "--transaction", e.tx, "--deny-read", secret)
		if strings.Contains(r.Stdout+r.Stderr, "hunter2") {
			t.Errorf("the secret leaked: %v", r)
		}
		rep := requireReport(t, r)
		if want := []Change{{Op: "created", Path: filepath.Join(e.ws, "other"), Type: "file", Size: 3, Mode: "0644", Root: e.ws}}; !reflect.DeepEqual(rep.Changes, want) {
			t.Errorf("report changes = %+v, want %+v", rep.Changes, want)
		}
		c := e.cli(t, "commit", e.tx)
		if c.Exit != 0 {
			t.Fatalf("commit: exit = %d, want 0 (%v)", c.Exit, c)
		}
		if got := readFile(t, secret); got != "TOKEN=hunter2\n" {
			t.Errorf("secret.env = %q, want it as it was", got)
		}
		if got := readFile(t, filepath.Join(e.ws, "other")); got != "ok\n" {
			t.Errorf("other = %q, want %q", got, "ok\n")
		}
	})
}
