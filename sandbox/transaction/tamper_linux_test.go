package transaction

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// tamperEnv is a transaction whose one command wrote "new" (sealed), a
// victim directory outside everything with a file in it, and the workspace.
type tamperEnv struct {
	tx     *Tx
	ws     string
	victim string
}

func newTamperEnv(t *testing.T) tamperEnv {
	t.Helper()
	base := t.TempDir()
	e := tamperEnv{ws: filepath.Join(base, "ws"), victim: filepath.Join(base, "victim")}
	for _, d := range []string{e.ws, e.victim} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.victim, "authorized_keys"), []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.ws, "old"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.tx, err = Create(filepath.Join(base, "tx"), e.ws); err != nil {
		t.Fatal(err)
	}
	e.command(t, func(upper string) {
		if err := os.WriteFile(filepath.Join(upper, "new"), []byte("new\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	return e
}

// command stands for a command of the transaction: write runs while the
// transaction is held, and its writes are sealed.
func (e tamperEnv) command(t *testing.T, write func(upper string)) {
	t.Helper()
	h, err := e.tx.Hold()
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}
	write(e.tx.UpperDir())
	if err := h.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// requireRefused checks that every way into the transaction refuses it as
// tampered, and that neither the workspace nor the victim changed.
func (e tamperEnv) requireRefused(t *testing.T, want string) {
	t.Helper()
	tx, err := Open(e.tx.Dir())
	if err == nil {
		_, err = tx.Commit()
	}
	if !errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), want) {
		t.Errorf("Commit: %v, want ErrTampered naming %q", err, want)
	}
	if tx != nil {
		if _, err := tx.Hold(); !errors.Is(err, ErrTampered) {
			t.Errorf("Hold: %v, want ErrTampered", err)
		}
		if err := tx.Diff(&bytes.Buffer{}, DiffOptions{}); !errors.Is(err, ErrTampered) {
			t.Errorf("Diff: %v, want ErrTampered", err)
		}
	}
	names, _ := os.ReadDir(e.ws)
	if len(names) != 1 || names[0].Name() != "old" {
		t.Errorf("the workspace changed: %v", names)
	}
	if b, err := os.ReadFile(filepath.Join(e.victim, "authorized_keys")); err != nil || string(b) != "mine\n" {
		t.Errorf("the victim changed: %q %v", b, err)
	}
	if names, _ := os.ReadDir(e.victim); len(names) != 1 {
		t.Errorf("the victim directory changed: %v", names)
	}
}

// TestTampered: whatever changes the transaction's directory other than
// through a command's overlay, Commit, Hold and Diff refuse it, and nothing
// reaches the workspace or anywhere else.
func TestTampered(t *testing.T) {
	for _, c := range []struct {
		name, want string
		tamper     func(t *testing.T, e tamperEnv)
	}{
		{"manifest names another workspace", "does not verify", func(t *testing.T, e tamperEnv) {
			p := filepath.Join(e.tx.Dir(), manifestName)
			b, _ := os.ReadFile(p)
			b = bytes.Replace(b, []byte(`"workspace":"`+e.ws), []byte(`"workspace":"`+e.victim), 1)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"manifest moves the start", "does not verify", func(t *testing.T, e tamperEnv) {
			p := filepath.Join(e.tx.Dir(), manifestName)
			b, _ := os.ReadFile(p)
			b = bytes.Replace(b, []byte(`"started_ctime_ns":1`), []byte(`"started_ctime_ns":2`), 1)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"file planted in the upper layer", "planted added", func(t *testing.T, e tamperEnv) {
			if err := os.WriteFile(filepath.Join(e.tx.UpperDir(), "planted"), []byte("x"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"sealed file rewritten", "new changed", func(t *testing.T, e tamperEnv) {
			if err := os.WriteFile(filepath.Join(e.tx.UpperDir(), "new"), []byte("evil\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"sealed file chmod-ed", "new changed", func(t *testing.T, e tamperEnv) {
			if err := os.Chmod(filepath.Join(e.tx.UpperDir(), "new"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"upper layer replaced by a symlink", "upper layer", func(t *testing.T, e tamperEnv) {
			if err := os.Rename(e.tx.UpperDir(), e.tx.UpperDir()+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(e.victim, e.tx.UpperDir()); err != nil {
				t.Fatal(err)
			}
		}},
		{"opaque mark removed", "changed", func(t *testing.T, e tamperEnv) {
			e.command(t, func(upper string) {
				if err := os.Mkdir(filepath.Join(upper, "d"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := unix.Setxattr(filepath.Join(upper, "d"), "user.overlay.opaque", []byte("y"), 0); err != nil {
					t.Fatal(err)
				}
			})
			if err := unix.Removexattr(filepath.Join(e.tx.UpperDir(), "d"), "user.overlay.opaque"); err != nil {
				t.Fatal(err)
			}
		}},
		{"hard link to a file outside", "hard link outside", func(t *testing.T, e tamperEnv) {
			if err := os.Link(filepath.Join(e.victim, "authorized_keys"), filepath.Join(e.tx.UpperDir(), "keys")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newTamperEnv(t)
			c.tamper(t, e)
			e.requireRefused(t, c.want)
		})
	}
}

// TestTamperedWorkspace: a workspace replaced since the transaction
// started (a symlink to another directory, or another directory at its
// path) is refused: Commit writes nothing there.
func TestTamperedWorkspace(t *testing.T) {
	for _, c := range []struct {
		name    string
		replace func(t *testing.T, e tamperEnv)
	}{
		{"symlink", func(t *testing.T, e tamperEnv) {
			if err := os.Rename(e.ws, e.ws+".moved"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(e.victim, e.ws); err != nil {
				t.Fatal(err)
			}
		}},
		{"another directory", func(t *testing.T, e tamperEnv) {
			if err := os.Rename(e.ws, e.ws+".moved"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(e.ws, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newTamperEnv(t)
			c.replace(t, e)
			_, err := e.tx.Commit()
			if err == nil || !strings.Contains(err.Error(), "workspace") {
				t.Errorf("Commit into a replaced workspace: %v", err)
			}
			if names, _ := os.ReadDir(e.victim); len(names) != 1 {
				t.Errorf("the victim directory changed: %v", names)
			}
			if _, err := os.Lstat(filepath.Join(e.ws, "new")); err == nil {
				t.Errorf("Commit wrote into the replaced workspace")
			}
		})
	}
}

// TestCommandWithoutSupervisor: a command whose harness died before it
// ended leaves writes the seal does not cover: they are refused, with a
// message that says so, and the transaction can still be discarded.
func TestCommandWithoutSupervisor(t *testing.T) {
	e := newTamperEnv(t)
	h, err := e.tx.Hold()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.tx.UpperDir(), "late"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Close() // the harness died: nothing sealed
	_, err = e.tx.Commit()
	if !errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), "did not end under its supervisor") {
		t.Errorf("Commit: %v", err)
	}
	if err := e.tx.Discard(); err != nil {
		t.Errorf("Discard: %v", err)
	}
}

// TestCommitStripsSetID: a file the command left set-user-ID or
// set-group-ID is applied without those bits, and said so.
func TestCommitStripsSetID(t *testing.T) {
	e := newTamperEnv(t)
	e.command(t, func(upper string) {
		for name, mode := range map[string]os.FileMode{"suid": os.ModeSetuid | 0o755, "sgid": os.ModeSetgid | 0o755, "plain": 0o755} {
			p := filepath.Join(upper, name)
			if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
		}
	})
	res, err := e.tx.Commit()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"suid", "sgid", "plain"} {
		fi, err := os.Stat(filepath.Join(e.ws, name))
		if err != nil || fi.Mode() != 0o755 {
			t.Errorf("%s: %v %v, want -rwxr-xr-x", name, fi.Mode(), err)
		}
	}
	if strings.Join(res.Stripped, ",") != "sgid,suid" {
		t.Errorf("Stripped = %v", res.Stripped)
	}
}

// TestDiffEscapes: a name or a line built to drive the reviewer's
// terminal or fake a diff header is shown escaped.
func TestDiffEscapes(t *testing.T) {
	e := newTamperEnv(t)
	e.command(t, func(upper string) {
		if err := os.WriteFile(filepath.Join(upper, "ok.txt\n+++ innocent"), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(upper, "hidden"), []byte("seen\n\x1b[1A\x1b[2Kevil\r\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	var out bytes.Buffer
	if err := e.tx.Diff(&out, DiffOptions{}); err != nil {
		t.Fatal(err)
	}
	d := out.String()
	if strings.ContainsAny(d, "\x1b\r") || strings.Contains(d, "\n+++ innocent") {
		t.Errorf("diff holds raw control characters or a fake header:\n%q", d)
	}
	for _, want := range []string{`+++ b/ok.txt\n+++ innocent`, `+\x1b[1A\x1b[2Kevil\r`} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
}
