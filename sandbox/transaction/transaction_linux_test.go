package transaction

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func relChanges(t *testing.T, tx *Tx) []string {
	t.Helper()
	list, err := tx.Changes()
	if err != nil {
		t.Fatalf("Changes: %v", err)
	}
	var out []string
	for _, c := range list {
		rel, err := filepath.Rel(tx.Workspace(), c.Path)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c.Op+" "+rel+" "+c.Type)
	}
	return out
}

func TestChanges(t *testing.T) {
	forEachMounter(t, func(t *testing.T, env *testEnv) {
		env.writeFiles(t, scenarioFiles)
		tx := env.create(t)
		env.runInOverlay(t, tx, scenarioScript)

		wantPrefix := "user.overlay."
		if env.m.trusted {
			wantPrefix = "trusted.overlay."
		}
		if names := listXattrs(filepath.Join(tx.UpperDir(), "mod.txt")); len(names) == 0 || !strings.HasPrefix(names[0], wantPrefix) {
			t.Errorf("xattrs of a copied-up file: %q, want %s*", names, wantPrefix)
		}

		got := relChanges(t, tx)
		want := []string{
			"removed d ",
			"removed del.txt ",
			"modified dir2file file",
			"mode empty dir",
			"created fifo other",
			"modified file2dir dir",
			"created file2dir/in file",
			"modified link symlink",
			"modified mod.txt file",
			"mode modeonly.sh file",
			"created newdir dir",
			"created newdir/inner dir",
			"created newdir/inner/deep file",
			"created newdir/z file",
			"created newlink symlink",
			"modified opq dir",
			"created opq/nested dir",
			"created opq/nested/n file",
			"created opq/new file",
			"removed renamed-from.txt ",
			"created renamed-to.txt file",
			"mode ro dir",
			"modified ro/readonly.txt file",
			"created sub/added file",
			"modified sub/deep/more file",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}

		list, _ := tx.Changes()
		for _, c := range list {
			switch filepath.Base(c.Path) {
			case "mod.txt":
				if c.Size != int64(len("one\ntwo\nthree\nfour\n")) || c.Mode != "0644" {
					t.Errorf("mod.txt: %+v", c)
				}
			case "modeonly.sh":
				if c.Mode != "0755" {
					t.Errorf("modeonly.sh: %+v", c)
				}
			case "ro":
				if c.Mode != "0555" {
					t.Errorf("ro: %+v", c)
				}
			}
			if !filepath.IsAbs(c.Path) || !strings.HasPrefix(c.Path, tx.Workspace()+"/") {
				t.Errorf("path %q is not absolute in the workspace", c.Path)
			}
		}
		// The JSON form is the one the rest of dsh uses.
		data, _ := json.Marshal(list[0])
		if !strings.Contains(string(data), `"op":"removed"`) || strings.Contains(string(data), `"type"`) {
			t.Errorf("JSON of a removal: %s", data)
		}
	})
}

// TestChangesAcrossRuns checks that a second command in the same
// transaction sees and extends the first one's changes.
func TestChangesAcrossRuns(t *testing.T) {
	forEachMounter(t, func(t *testing.T, env *testEnv) {
		env.writeFiles(t, map[string]string{"a": "1\n", "b": "2\n"})
		tx := env.create(t)
		env.runInOverlay(t, tx, "echo x >> a; echo new > c")
		tx2, err := OpenOrCreate(env.txDir, env.ws)
		if err != nil {
			t.Fatal(err)
		}
		tree := env.runInOverlay(t, tx2, "test \"$(cat c)\" = new; rm c; rm b; echo y >> a")
		got := strings.Join(relChanges(t, tx2), "\n")
		if want := "modified a file\nremoved b "; got != want {
			t.Errorf("changes:\n%s\nwant:\n%s", got, want)
		}
		if _, err := tx2.Commit(); err != nil {
			t.Fatal(err)
		}
		if host := env.hostTree(t); host != tree {
			t.Errorf("workspace after commit:\n%s\noverlay view:\n%s", host, tree)
		}
		data, _ := os.ReadFile(filepath.Join(env.ws, "a"))
		if string(data) != "1\nx\ny\n" {
			t.Errorf("a = %q", data)
		}
	})
}

func TestCommitMatchesOverlayView(t *testing.T) {
	forEachMounter(t, func(t *testing.T, env *testEnv) {
		env.writeFiles(t, scenarioFiles)
		tx := env.create(t)
		overlayView := env.runInOverlay(t, tx, scenarioScript)

		res, err := tx.Commit()
		if err != nil {
			t.Fatalf("Commit: %v", err)
		}
		if host := env.hostTree(t); host != overlayView {
			t.Errorf("workspace after commit:\n%s\noverlay view before commit:\n%s", host, overlayView)
		}
		if res.Applied == 0 || res.Removed == 0 || len(res.Skipped) != 0 {
			t.Errorf("result %+v", res)
		}
		assertNoLeftovers(t, env)
		if tx.State() != StateCommitted {
			t.Errorf("state %q", tx.State())
		}
		if _, err := tx.Commit(); !errors.Is(err, ErrEnded) {
			t.Errorf("second Commit: %v, want ErrEnded", err)
		}
		if _, err := Open(env.txDir); !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "committed") {
			t.Errorf("Open after commit: %v, want ErrEnded naming the state", err)
		}
	})
}

// TestCommitAcrossFilesystems puts the workspace on tmpfs and the upper
// layer elsewhere, so that Commit copies instead of renaming. (Not the
// other way round: tmpfs keeps the overlay's user xattrs only from Linux
// 6.6, and the workspace, the lower layer, needs none.)
func TestCommitAcrossFilesystems(t *testing.T) {
	var shm, tmp os.FileInfo
	var err error
	if shm, err = os.Stat("/dev/shm"); err != nil {
		t.Skip("no /dev/shm")
	}
	if tmp, err = os.Stat(os.TempDir()); err != nil {
		t.Fatal(err)
	}
	if sameDevice(shm, tmp) {
		t.Skip("/dev/shm and the temporary directory are on the same filesystem")
	}
	for _, m := range mounters(t) {
		t.Run(m.name, func(t *testing.T) {
			env := newTestEnvIn(t, m, "/dev/shm", os.TempDir())
			env.writeFiles(t, scenarioFiles)
			tx := env.create(t)
			overlayView := env.runInOverlay(t, tx, scenarioScript)
			if _, err := tx.Commit(); err != nil {
				t.Fatalf("Commit: %v", err)
			}
			if host := env.hostTree(t); host != overlayView {
				t.Errorf("workspace after commit:\n%s\noverlay view before commit:\n%s", host, overlayView)
			}
			assertNoLeftovers(t, env)
		})
	}
}

// assertNoLeftovers checks that a finished commit left no upper or work
// directory, journal, or trash and temporary names in the workspace.
func assertNoLeftovers(t *testing.T, env *testEnv) {
	t.Helper()
	for _, name := range []string{upperName, workName, journalName} {
		if _, err := os.Lstat(filepath.Join(env.txDir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after commit (%v)", name, err)
		}
	}
	_ = filepath.Walk(env.ws, func(p string, _ os.FileInfo, err error) error {
		if err == nil && (strings.HasPrefix(filepath.Base(p), trashPrefix) || strings.HasPrefix(filepath.Base(p), tempPrefix)) {
			t.Errorf("leftover %s", p)
		}
		return nil
	})
}

func TestDiscard(t *testing.T) {
	forEachMounter(t, func(t *testing.T, env *testEnv) {
		env.writeFiles(t, scenarioFiles)
		before := env.hostTree(t)
		tx := env.create(t)
		env.runInOverlay(t, tx, scenarioScript)
		if err := tx.Discard(); err != nil {
			t.Fatalf("Discard: %v", err)
		}
		if after := env.hostTree(t); after != before {
			t.Errorf("workspace changed by discard:\n%s\nbefore:\n%s", after, before)
		}
		for _, dir := range []string{tx.UpperDir(), tx.WorkDir()} {
			if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s still exists after discard (%v)", dir, err)
			}
		}
		if err := tx.Discard(); !errors.Is(err, ErrEnded) {
			t.Errorf("second Discard: %v, want ErrEnded", err)
		}
		if _, err := Open(env.txDir); !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "discarded") {
			t.Errorf("Open after discard: %v", err)
		}
	})
}

func TestCommitConflicts(t *testing.T) {
	tests := []struct {
		name    string
		script  string                // run in the overlay
		host    func(ws string) error // run on the host afterwards
		wantRel string                // a path expected among the conflicts
		reason  string
	}{
		{
			name:    "file modified in the workspace",
			script:  "echo four >> mod.txt",
			host:    func(ws string) error { return appendFile(filepath.Join(ws, "mod.txt"), "host\n") },
			wantRel: "mod.txt",
			reason:  "changed",
		},
		{
			name:    "modified file removed from the workspace",
			script:  "echo four >> mod.txt",
			host:    func(ws string) error { return os.Remove(filepath.Join(ws, "mod.txt")) },
			wantRel: "mod.txt",
			reason:  "removed",
		},
		{
			name:    "file added under a removed directory",
			script:  "rm -rf d",
			host:    func(ws string) error { return os.WriteFile(filepath.Join(ws, "d/sub/host"), nil, 0o644) },
			wantRel: "d/sub",
			reason:  "changed",
		},
		{
			name:    "file changed under a replaced directory",
			script:  "rm -rf opq && mkdir opq",
			host:    func(ws string) error { return appendFile(filepath.Join(ws, "opq/x"), "host\n") },
			wantRel: "opq/x",
			reason:  "changed",
		},
		{
			name:    "created file also created in the workspace",
			script:  "echo mine > brand-new",
			host:    func(ws string) error { return os.WriteFile(filepath.Join(ws, "brand-new"), []byte("theirs\n"), 0o644) },
			wantRel: "brand-new",
			reason:  "changed",
		},
		{
			name:   "directory replaced by a symlink",
			script: "echo added > sub/added",
			host: func(ws string) error {
				if err := os.Rename(filepath.Join(ws, "sub"), filepath.Join(ws, "sub.moved")); err != nil {
					return err
				}
				return os.Symlink("/", filepath.Join(ws, "sub"))
			},
			wantRel: "sub",
			reason:  "no longer a directory",
		},
	}
	for _, m := range mounters(t) {
		t.Run(m.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					env := newTestEnv(t, m)
					env.writeFiles(t, scenarioFiles)
					tx := env.create(t)
					env.runInOverlay(t, tx, tc.script)
					if err := tc.host(env.ws); err != nil {
						t.Fatal(err)
					}
					before := env.hostTree(t)
					upperBefore := listUpper(t, tx)

					_, err := tx.Commit()
					var conflict *ConflictError
					if !errors.As(err, &conflict) {
						t.Fatalf("Commit: %v, want *ConflictError", err)
					}
					want := filepath.Join(env.ws, tc.wantRel)
					if !strings.Contains(conflict.Reasons[want], tc.reason) {
						t.Errorf("conflicts %v, reasons %v: want %s (%s)", conflict.Paths, conflict.Reasons, want, tc.reason)
					}
					if !strings.Contains(err.Error(), want) {
						t.Errorf("message %q does not name %s", err, want)
					}
					if after := env.hostTree(t); after != before {
						t.Errorf("workspace changed by a refused commit:\n%s\nbefore:\n%s", after, before)
					}
					if after := listUpper(t, tx); after != upperBefore {
						t.Errorf("upper layer changed by a refused commit")
					}
					if tx.State() != StateOpen {
						t.Errorf("state %q after a refused commit", tx.State())
					}
				})
			}
		})
	}
}

func TestConflictErrorMessage(t *testing.T) {
	e := &ConflictError{Reasons: map[string]string{}}
	for i := range 12 {
		e.add("/w/"+string(rune('a'+i)), "changed since the transaction started")
	}
	msg := e.Error()
	if !strings.Contains(msg, "12 path") || !strings.Contains(msg, "/w/j") || strings.Contains(msg, "/w/k") || !strings.Contains(msg, "and 2 more") {
		t.Errorf("message %q", msg)
	}
}

func TestInterruptedCommit(t *testing.T) {
	m := mounters(t)[0]
	for _, stopAfter := range []int{1, 3, 5, 8, 13, 21} {
		t.Run("after "+string(rune('0'+stopAfter/10))+string(rune('0'+stopAfter%10)), func(t *testing.T) {
			env := newTestEnv(t, m)
			env.writeFiles(t, scenarioFiles)
			tx := env.create(t)
			overlayView := env.runInOverlay(t, tx, scenarioScript)

			tx.stopAfterEntries = stopAfter
			if _, err := tx.Commit(); !errors.Is(err, errInterrupted) {
				t.Fatalf("interrupted Commit: %v", err)
			}
			if err := tx.Discard(); err == nil || !strings.Contains(err.Error(), "partly committed") {
				t.Errorf("Discard of a partly committed transaction: %v", err)
			}
			resumed, err := Open(env.txDir)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if resumed.State() != StateCommitting {
				t.Errorf("state %q", resumed.State())
			}
			if _, err := resumed.Commit(); err != nil {
				t.Fatalf("resumed Commit: %v", err)
			}
			if host := env.hostTree(t); host != overlayView {
				t.Errorf("workspace after resumed commit:\n%s\noverlay view:\n%s", host, overlayView)
			}
			assertNoLeftovers(t, env)
		})
	}
}

func TestGitRepositoryCommitted(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	forEachMounter(t, func(t *testing.T, env *testEnv) {
		env.writeFiles(t, map[string]string{"main.go": "package main\n", "lib/lib.go": "package lib\n", "README": "hello\n"})
		tx := env.create(t)
		overlayView := env.runInOverlay(t, tx, `git init -q
git add -A
git -c user.name=test -c user.email=test@example.com commit -q -m init
echo change >> README
git -c user.name=test -c user.email=test@example.com commit -q -am second
git gc -q`)
		if _, err := tx.Commit(); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		if host := env.hostTree(t); host != overlayView {
			t.Errorf("workspace after commit differs from the overlay view")
		}
		for _, args := range [][]string{{"fsck", "--strict", "--no-progress"}, {"status", "--porcelain"}} {
			cmd := exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...)
			cmd.Dir = env.ws
			out, err := cmd.CombinedOutput()
			if err != nil || len(out) != 0 {
				t.Errorf("git %s: %v: %s", args[0], err, out)
			}
		}
	})
}

func TestCreateValidation(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	nonEmpty := filepath.Join(base, "full")
	file := filepath.Join(base, "file")
	for _, d := range []string{ws, nonEmpty, filepath.Join(base, "outer/ws2")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(nonEmpty, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ws, filepath.Join(base, "ws-link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, workspace string
		want                 []string
	}{
		{"relative dir", "tx", ws, []string{`"tx"`, "not an absolute path"}},
		{"relative workspace", filepath.Join(base, "tx"), "ws", []string{`"ws"`, "not an absolute path"}},
		{"dir inside workspace", filepath.Join(ws, "tx"), ws, []string{filepath.Join(ws, "tx"), "inside the workspace", ws}},
		{"dir inside workspace through a symlink", filepath.Join(base, "ws-link", "tx"), ws, []string{"inside the workspace"}},
		{"dir is the workspace", ws, ws, []string{"inside the workspace"}},
		{"workspace inside dir", filepath.Join(base, "outer"), filepath.Join(base, "outer/ws2"), []string{"workspace " + filepath.Join(base, "outer/ws2"), "inside the transaction directory " + filepath.Join(base, "outer")}},
		{"non-empty dir", nonEmpty, ws, []string{nonEmpty, "not empty"}},
		{"dir is a file", file, ws, []string{file, "not a directory"}},
		{"missing workspace", filepath.Join(base, "tx"), filepath.Join(base, "nope"), []string{"nope"}},
		{"workspace is a file", filepath.Join(base, "tx"), file, []string{file, "not a directory"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := Create(tc.dir, tc.workspace)
			if err == nil {
				t.Fatalf("Create succeeded: %s", tx.Dir())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(base, "tx")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed Create left %s behind", filepath.Join(base, "tx"))
	}
}

func TestCreateLayout(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ws, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "parent", "tx")
	tx, err := Create(dir, filepath.Join(base, "link"))
	if err != nil {
		t.Fatal(err)
	}
	if tx.Workspace() != ws || tx.Dir() != dir || tx.State() != StateOpen {
		t.Errorf("workspace %q dir %q state %q", tx.Workspace(), tx.Dir(), tx.State())
	}
	for path, mode := range map[string]os.FileMode{dir: 0o700, tx.UpperDir(): 0o755, tx.WorkDir(): 0o700} {
		fi, err := os.Stat(path)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want a directory with mode %v", path, fi.Mode(), err, mode)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		t.Fatal(err)
	}
	var m document
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	marker, err := lstat(filepath.Join(dir, markerName))
	if err != nil {
		t.Fatal(err)
	}
	wsSt, _ := lstat(ws)
	if m.Version != 2 || m.Dir != dir || m.Workspace != ws || m.WorkspaceIno != wsSt.Ino || m.State != "open" ||
		m.StartedCtimeNs != ctimeNs(marker) || m.Started == "" || len(m.Upper) != 1 || m.MAC == "" {
		t.Errorf("manifest %s (marker ctime %d)", data, ctimeNs(marker))
	}
	if !tx.Started().Equal(tx.Started().Round(0)) || tx.Started().UnixNano() != m.StartedCtimeNs {
		t.Errorf("Started %v", tx.Started())
	}
	// A workspace file written before Create is older than the start.
	old := filepath.Join(ws, "old")
	if err := os.WriteFile(old, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tx2dir := filepath.Join(base, "tx2")
	tx2, err := Create(tx2dir, ws)
	if err != nil {
		t.Fatal(err)
	}
	oldSt, _ := lstat(old)
	if ctimeNs(oldSt) >= tx2.startedCtimeNs {
		t.Errorf("ctime of a file written before Create (%d) is not before the start (%d)", ctimeNs(oldSt), tx2.startedCtimeNs)
	}
}

func TestOpenErrors(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	other := filepath.Join(base, "other")
	for _, d := range []string{ws, other, filepath.Join(base, "plain")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "plain", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	if _, err := Open(filepath.Join(base, "missing")); err == nil || !strings.Contains(err.Error(), "not a transaction directory: no transaction.json") {
		t.Errorf("Open of a missing dir: %v", err)
	}
	if _, err := Open(filepath.Join(base, "plain")); err == nil || !strings.Contains(err.Error(), "not a transaction directory: no transaction.json") {
		t.Errorf("Open of a plain dir: %v", err)
	}
	if _, err := OpenOrCreate(filepath.Join(base, "plain"), ws); err == nil {
		t.Errorf("OpenOrCreate of a non-empty plain dir succeeded")
	}

	dir := filepath.Join(base, "tx")
	tx, err := OpenOrCreate(dir, ws)
	if err != nil {
		t.Fatal(err)
	}
	again, err := OpenOrCreate(dir, ws)
	if err != nil || again.startedCtimeNs != tx.startedCtimeNs {
		t.Errorf("OpenOrCreate of the same workspace: %v", err)
	}
	if _, err := OpenOrCreate(dir, other); err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), ws) {
		t.Errorf("OpenOrCreate for another workspace: %v", err)
	}

	manifestPath := filepath.Join(dir, manifestName)
	good, _ := os.ReadFile(manifestPath)
	bad := strings.Replace(string(good), `"version":2`, `"version":3`, 1)
	if err := os.WriteFile(manifestPath, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "version 3") {
		t.Errorf("Open with a bad version: %v", err)
	}
	if err := os.WriteFile(manifestPath, good, 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir)
	if !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "committed") {
		t.Errorf("Open of a committed transaction: %v", err)
	}
	if _, err := OpenOrCreate(dir, ws); !errors.Is(err, ErrEnded) {
		t.Errorf("OpenOrCreate of a committed transaction: %v", err)
	}
	if _, err := again.Changes(); err != nil {
		// again still believes it is open; its upper layer is gone.
		t.Logf("Changes through a stale Tx: %v", err)
	}
	if _, err := again.Commit(); !errors.Is(err, ErrEnded) {
		t.Errorf("Commit through a stale Tx: %v, want ErrEnded", err)
	}
}

// TestBusy checks that Commit refuses while another process holds the
// transaction's lock.
func TestBusy(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	tx, err := Create(filepath.Join(base, "tx"), ws)
	if err != nil {
		t.Fatal(err)
	}
	// flock(1) says when it holds the lock: an event, not a bounded poll
	// (a loaded machine took more than the 2.5 s the poll allowed).
	cmd := exec.Command("flock", tx.Dir(), "sh", "-c", "echo locked; exec sleep 60")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal("flock(1): ", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("flock(1) said %q (%v), want it to hold the lock", line, err)
	}
	_, err = tx.Commit()
	if err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("Commit while locked: %v", err)
	}
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	return err
}

// listUpper lists the upper layer's paths, types and overlay xattrs.
func listUpper(t *testing.T, tx *Tx) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(tx.UpperDir(), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p + " " + fi.Mode().String())
		if isOpaque(p) {
			b.WriteString(" opaque")
		}
		if hasOverlayXattr(p, "origin") {
			b.WriteString(" origin")
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// listXattrs, isOpaque and hasOverlayXattr read an upper entry's xattrs
// by path, for the tests' eyes.
func listXattrs(path string) []string {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(path, buf)
	if err != nil {
		return nil
	}
	var names []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name != "" {
			names = append(names, name)
		}
	}
	return names
}

func isOpaque(path string) bool {
	for _, prefix := range overlayXattrPrefixes {
		buf := make([]byte, 8)
		if n, err := unix.Lgetxattr(path, prefix+"opaque", buf); err == nil && string(buf[:n]) == "y" {
			return true
		}
	}
	return false
}

func hasOverlayXattr(path, name string) bool {
	for _, prefix := range overlayXattrPrefixes {
		if _, err := unix.Lgetxattr(path, prefix+name, nil); err == nil {
			return true
		}
	}
	return false
}

func sameDevice(a, b os.FileInfo) bool {
	sa, okA := a.Sys().(*syscallStat)
	sb, okB := b.Sys().(*syscallStat)
	return okA && okB && sa.Dev == sb.Dev
}

// TestCreateNeedsUserXattrs: a transaction directory on a filesystem that
// keeps no user.* xattrs (tmpfs before Linux 6.6: /dev/shm) is refused at
// Create, with nothing left behind; where it keeps them, Create works.
func TestCreateNeedsUserXattrs(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "dsh-tx-xattr-")
	if err != nil {
		t.Fatalf("/dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	keeps := unix.Setxattr(shm, "user.test", []byte("1"), 0) == nil
	ws := t.TempDir()
	dir := filepath.Join(shm, "tx")
	tx, err := Create(dir, ws)
	if keeps {
		if err != nil {
			t.Fatalf("Create on a filesystem with user xattrs: %v", err)
		}
		if names, _ := unix.Listxattr(tx.UpperDir(), make([]byte, 256)); names != 0 {
			t.Errorf("the probe's xattr was left on %s", tx.UpperDir())
		}
		return
	}
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "without user extended attributes") {
		t.Fatalf("Create on a filesystem without user xattrs: got %v", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Create left %s behind (%v)", dir, err)
	}
}
