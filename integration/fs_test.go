//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const existingContent = "original content\n"

// fsEnv is what each filesystem case works with. WS and OUT are also in the
// command's environment as $WS and $OUT.
type fsEnv struct {
	id   identity
	mode string
	ws   string // the workspace (cwd of the command)
	out  string // a directory outside every writable root, owned by the identity
}

func (e fsEnv) ro() bool { return e.mode == "read-only" }

// newFSEnv prepares: $WS/inside (file), $OUT/existing (file, owned by the
// identity so that only the sandbox can deny writing it).
func newFSEnv(t *testing.T, id identity, mode string) fsEnv {
	t.Helper()
	e := fsEnv{id: id, mode: mode, ws: id.workspace(t), out: id.outside(t)}
	id.writeOwned(t, filepath.Join(e.ws, "inside"), existingContent, 0o644)
	id.writeOwned(t, filepath.Join(e.out, "existing"), existingContent, 0o644)
	return e
}

func (e fsEnv) run(t *testing.T, script string, extraFlags ...string) result {
	t.Helper()
	return e.id.run(t, runOpts{
		Flags: sandboxFlags(e.mode, e.ws, extraFlags...),
		Argv:  bash(script),
		Env:   []string{"WS=" + e.ws, "OUT=" + e.out},
		Dir:   e.ws,
	})
}

type outsideCase struct {
	name     string
	modes    []string // default: both confined modes
	setup    func(t *testing.T, e fsEnv)
	script   string
	wantFail bool // the command's exit status must be != 0
	op       string
	targets  func(e fsEnv) []string // acceptable denial targets
	check    func(t *testing.T, e fsEnv)
}

func outsideUnchanged(t *testing.T, e fsEnv) {
	t.Helper()
	requireContent(t, filepath.Join(e.out, "existing"), existingContent)
}

func absentOut(name string) func(t *testing.T, e fsEnv) {
	return func(t *testing.T, e fsEnv) {
		t.Helper()
		requireAbsent(t, filepath.Join(e.out, name))
		outsideUnchanged(t, e)
	}
}

func outPath(name string) func(e fsEnv) []string {
	return func(e fsEnv) []string { return []string{filepath.Join(e.out, name)} }
}

// outOrWS accepts the outside path, and in read-only mode (where both ends are
// outside the policy) also the workspace path.
func outOrWS(outName, wsName string) func(e fsEnv) []string {
	return func(e fsEnv) []string {
		ts := []string{filepath.Join(e.out, outName)}
		if e.ro() {
			ts = append(ts, filepath.Join(e.ws, wsName))
		}
		return ts
	}
}

var outsideCases = []outsideCase{
	{
		name: "direct create", script: `echo pwned > "$OUT/new"`, wantFail: true,
		op: "write", targets: outPath("new"), check: absentOut("new"),
	},
	{
		name: "overwrite existing", script: `echo pwned > "$OUT/existing"`, wantFail: true,
		op: "write", targets: outPath("existing"), check: outsideUnchanged,
	},
	{
		name: "append existing", script: `echo pwned >> "$OUT/existing"`, wantFail: true,
		op: "write", targets: outPath("existing"), check: outsideUnchanged,
	},
	{
		name: "relative path from an outside cwd", script: `cd "$OUT" && echo pwned > rel`, wantFail: true,
		op: "write", targets: outPath("rel"), check: absentOut("rel"),
	},
	{
		name: "cp into outside", script: `cp /etc/hostname "$OUT/copied"`, wantFail: true,
		op: "write", targets: outPath("copied"), check: absentOut("copied"),
	},
	{
		name: "python open for writing", script: `python3 -c 'import os; open(os.environ["OUT"]+"/py","w").write("pwned")'`, wantFail: true,
		op: "write", targets: outPath("py"), check: absentOut("py"),
	},
	{
		name: "through a symlink planted in the workspace",
		setup: func(t *testing.T, e fsEnv) {
			link := filepath.Join(e.ws, "link")
			if err := os.Symlink(filepath.Join(e.out, "new"), link); err != nil {
				t.Fatal(err)
			}
			_ = os.Lchown(link, int(e.id.uid), int(e.id.gid))
		},
		script: `echo pwned > link`, wantFail: true,
		op: "write",
		targets: func(e fsEnv) []string {
			return []string{filepath.Join(e.out, "new"), filepath.Join(e.ws, "link")}
		},
		check: absentOut("new"),
	},
	{
		name: "through a symlink to an existing outside file",
		setup: func(t *testing.T, e fsEnv) {
			link := filepath.Join(e.ws, "link")
			if err := os.Symlink(filepath.Join(e.out, "existing"), link); err != nil {
				t.Fatal(err)
			}
			_ = os.Lchown(link, int(e.id.uid), int(e.id.gid))
		},
		script: `echo pwned >> link`, wantFail: true,
		op: "write",
		targets: func(e fsEnv) []string {
			return []string{filepath.Join(e.out, "existing"), filepath.Join(e.ws, "link")}
		},
		check: outsideUnchanged,
	},
	{
		name:  "through a symlink the command plants",
		modes: []string{"workspace-write"},
		script: `ln -s "$OUT/new" link2 || exit 9
echo pwned > link2`, wantFail: true,
		op: "write",
		targets: func(e fsEnv) []string {
			return []string{filepath.Join(e.out, "new"), filepath.Join(e.ws, "link2")}
		},
		check: absentOut("new"),
	},
	{
		name:   "through a hardlink the command tries to plant",
		script: `ln "$OUT/existing" hl; echo pwned >> hl; cat "$OUT/existing"`,
		op:     "link", targets: outOrWS("existing", "hl"),
		check: func(t *testing.T, e fsEnv) {
			outsideUnchanged(t, e)
			if fi, err := os.Stat(filepath.Join(e.out, "existing")); err == nil {
				if n := fi.Sys().(*syscall.Stat_t).Nlink; n != 1 {
					t.Errorf("outside file has %d links, want 1 (a hardlink was planted)", n)
				}
			}
		},
	},
	{
		name:   "rename in (outside file moved into the workspace)",
		script: `python3 -c 'import os; os.rename(os.environ["OUT"]+"/existing", os.environ["WS"]+"/moved")'`, wantFail: true,
		op: "rename", targets: outOrWS("existing", "moved"),
		check: func(t *testing.T, e fsEnv) {
			outsideUnchanged(t, e)
			requireAbsent(t, filepath.Join(e.ws, "moved"))
		},
	},
	{
		name:   "rename out (workspace file moved outside)",
		script: `python3 -c 'import os; os.rename(os.environ["WS"]+"/inside", os.environ["OUT"]+"/moved")'`, wantFail: true,
		op: "rename", targets: outOrWS("moved", "inside"),
		check: func(t *testing.T, e fsEnv) {
			requireAbsent(t, filepath.Join(e.out, "moved"))
			requireContent(t, filepath.Join(e.ws, "inside"), existingContent)
		},
	},
	{
		name:   "mv out (rename, then copy fallback)",
		script: `mv inside "$OUT/mv"`, wantFail: true,
		check: func(t *testing.T, e fsEnv) {
			requireAbsent(t, filepath.Join(e.out, "mv"))
			requireContent(t, filepath.Join(e.ws, "inside"), existingContent)
		},
	},
	{
		name: "unlink an outside file", script: `rm -f "$OUT/existing"`, wantFail: true,
		op: "remove", targets: outPath("existing"), check: outsideUnchanged,
	},
	{
		name: "truncate(2) an outside file", script: `python3 -c 'import os; os.truncate(os.environ["OUT"]+"/existing", 0)'`, wantFail: true,
		op: "truncate", targets: outPath("existing"), check: outsideUnchanged,
	},
	{
		name: "O_TRUNC open of an outside file", script: `: > "$OUT/existing"`, wantFail: true,
		op: "write", targets: outPath("existing"), check: outsideUnchanged,
	},
	{
		name: "truncate(1) utility", script: `truncate -s 0 "$OUT/existing"`, wantFail: true,
		op: "write", targets: outPath("existing"), check: outsideUnchanged,
	},
	{
		name: "via /proc/self/root", script: `echo pwned > "/proc/self/root$OUT/new"`, wantFail: true,
		op: "write",
		targets: func(e fsEnv) []string {
			return []string{filepath.Join(e.out, "new"), "/proc/self/root" + filepath.Join(e.out, "new")}
		},
		check: absentOut("new"),
	},
	{
		name: "via /proc/self/cwd after cd outside", script: `cd "$OUT" && echo pwned > /proc/self/cwd/viacwd`, wantFail: true,
		op: "write",
		targets: func(e fsEnv) []string {
			return []string{filepath.Join(e.out, "viacwd"), "/proc/self/cwd/viacwd"}
		},
		check: absentOut("viacwd"),
	},
	{
		name: "reopen a read-only fd for writing via /proc/self/fd", script: `exec 4< "$OUT/existing"; echo pwned > /proc/self/fd/4`, wantFail: true,
		op: "write",
		targets: func(e fsEnv) []string {
			return []string{filepath.Join(e.out, "existing"), "/proc/self/fd/4"}
		},
		check: outsideUnchanged,
	},
	{
		name: "from a nested child", script: `bash -c "bash -c 'echo pwned > \"\$OUT/nested\"'"`, wantFail: true,
		op: "write", targets: outPath("nested"), check: absentOut("nested"),
	},
	{
		name: "from a setsid grandchild", script: `setsid -w bash -c 'bash -c "echo pwned > \"\$OUT/setsid\""'`, wantFail: true,
		op: "write", targets: outPath("setsid"), check: absentOut("setsid"),
	},
	{
		name: "mkdir outside", script: `mkdir "$OUT/dir"`, wantFail: true,
		op: "mkdir", targets: outPath("dir"), check: absentOut("dir"),
	},
	{
		name: "symlink created outside", script: `ln -s /etc/passwd "$OUT/sl"`, wantFail: true,
		op: "symlink", targets: outPath("sl"), check: absentOut("sl"),
	},
	{
		name: "mkfifo outside", script: `mkfifo "$OUT/fifo"`, wantFail: true,
		op: "mknod", targets: outPath("fifo"), check: absentOut("fifo"),
	},
}

// TestWritesOutsideRootsDenied: every way of writing outside the writable
// roots fails, leaves the world unchanged and is reported as a fact.
func TestWritesOutsideRootsDenied(t *testing.T) {
	t.Parallel()
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				for _, c := range outsideCases {
					if c.modes != nil && !contains(c.modes, mode) {
						continue
					}
					t.Run(c.name, func(t *testing.T) {
						e := newFSEnv(t, id, mode)
						if c.setup != nil {
							c.setup(t, e)
						}
						r := e.run(t, c.script)
						if c.wantFail {
							requireFailed(t, r)
						}
						c.check(t, e)
						if c.op != "" {
							requireDenial(t, r, mode, c.op, c.targets(e)...)
						} else {
							requireReport(t, r)
						}
					})
				}
			})
		}
	})
}

// TestWritesInsideRootsLand: the allowed twins in workspace-write.
func TestWritesInsideRootsLand(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		cases := []struct {
			name   string
			script string
			flags  func(e fsEnv, extra string) []string
			check  func(t *testing.T, e fsEnv, extra string)
		}{
			{
				name:   "create, append, mkdir, rename, symlink, unlink in the workspace",
				script: `set -e; echo hello > new; echo more >> inside; mkdir -p d/e; mv new d/e/moved; ln -s d/e/moved sl; echo via >> sl; touch gone; rm gone; python3 -c 'import os; os.truncate("inside", 3)'`,
				check: func(t *testing.T, e fsEnv, _ string) {
					requireContent(t, filepath.Join(e.ws, "d/e/moved"), "hello\nvia\n")
					requireContent(t, filepath.Join(e.ws, "inside"), existingContent[:3])
					requireAbsent(t, filepath.Join(e.ws, "gone"))
					requireAbsent(t, filepath.Join(e.ws, "new"))
				},
			},
			{
				name:   "nested child and setsid grandchild",
				script: `set -e; bash -c "bash -c 'echo n > nested'"; setsid -w bash -c 'echo s > setsid'`,
				check: func(t *testing.T, e fsEnv, _ string) {
					requireContent(t, filepath.Join(e.ws, "nested"), "n\n")
					requireContent(t, filepath.Join(e.ws, "setsid"), "s\n")
				},
			},
			{
				name:   "/tmp and /dev/shm",
				script: `set -e; echo t > "/tmp/$N"; echo s > "/dev/shm/$N"`,
				check: func(t *testing.T, e fsEnv, n string) {
					requireContent(t, "/tmp/"+n, "t\n")
					requireContent(t, "/dev/shm/"+n, "s\n")
				},
			},
			{
				name:   "$TMPDIR is a writable root",
				flags:  func(e fsEnv, _ string) []string { return nil },
				script: `set -e; echo t > "$TMPDIR/viatmpdir"; cat <<<heredoc >/dev/null`,
				check: func(t *testing.T, e fsEnv, _ string) {
					requireContent(t, filepath.Join(e.out, "viatmpdir"), "t\n")
				},
			},
			{
				name:   "--allow-write DIR",
				flags:  func(e fsEnv, _ string) []string { return []string{"--allow-write", e.out} },
				script: `set -e; echo a > "$OUT/allowed"; echo b >> "$OUT/existing"; mkdir "$OUT/d"`,
				check: func(t *testing.T, e fsEnv, _ string) {
					requireContent(t, filepath.Join(e.out, "allowed"), "a\n")
					requireContent(t, filepath.Join(e.out, "existing"), existingContent+"b\n")
				},
			},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e := newFSEnv(t, id, "workspace-write")
				n := "dsh-it-" + nonce()
				t.Cleanup(func() { os.Remove("/tmp/" + n); os.Remove("/dev/shm/" + n) })
				var flags []string
				if c.flags != nil {
					flags = c.flags(e, n)
				}
				env := []string{"WS=" + e.ws, "OUT=" + e.out, "N=" + n}
				if strings.HasPrefix(c.name, "$TMPDIR") {
					env = append(env, "TMPDIR="+e.out)
				}
				r := id.run(t, runOpts{
					Flags: sandboxFlags("workspace-write", e.ws, flags...),
					Argv:  bash(c.script),
					Env:   env,
					Dir:   e.ws,
				})
				requireExit(t, r, 0)
				requireNoDenials(t, r)
				c.check(t, e, n)
			})
		}
	})
}

// TestReadOnlyDeniesWorkspaceWrites: read-only mode denies every write,
// including the workspace and /tmp.
func TestReadOnlyDeniesWorkspaceWrites(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		cases := []struct {
			name, script, op, target string
			check                    func(t *testing.T, e fsEnv, n string)
		}{
			{"create in workspace", `echo x > new`, "write", "WS/new", func(t *testing.T, e fsEnv, _ string) {
				requireAbsent(t, filepath.Join(e.ws, "new"))
			}},
			{"append in workspace", `echo x >> inside`, "write", "WS/inside", func(t *testing.T, e fsEnv, _ string) {
				requireContent(t, filepath.Join(e.ws, "inside"), existingContent)
			}},
			{"mkdir in workspace", `mkdir d`, "mkdir", "WS/d", func(t *testing.T, e fsEnv, _ string) {
				requireAbsent(t, filepath.Join(e.ws, "d"))
			}},
			{"unlink in workspace", `rm -f inside`, "remove", "WS/inside", func(t *testing.T, e fsEnv, _ string) {
				requireContent(t, filepath.Join(e.ws, "inside"), existingContent)
			}},
			{"write /tmp", `echo x > "/tmp/$N"`, "write", "/tmp/N", func(t *testing.T, e fsEnv, n string) {
				requireAbsent(t, "/tmp/"+n)
			}},
			{"write /dev/shm", `echo x > "/dev/shm/$N"`, "write", "/dev/shm/N", func(t *testing.T, e fsEnv, n string) {
				requireAbsent(t, "/dev/shm/"+n)
			}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e := newFSEnv(t, id, "read-only")
				n := "dsh-it-" + nonce()
				t.Cleanup(func() { os.Remove("/tmp/" + n); os.Remove("/dev/shm/" + n) })
				r := id.run(t, runOpts{
					Flags: sandboxFlags("read-only", e.ws),
					Argv:  bash(c.script),
					Env:   []string{"WS=" + e.ws, "OUT=" + e.out, "N=" + n},
					Dir:   e.ws,
				})
				requireFailed(t, r)
				c.check(t, e, n)
				target := strings.NewReplacer("WS", e.ws, "/N", "/"+n).Replace(c.target)
				requireDenial(t, r, "read-only", c.op, target)
			})
		}
	})
}

// TestDangerFullAccessWritesAnywhere: no confinement, no denials, level none.
func TestDangerFullAccessWritesAnywhere(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		e := newFSEnv(t, id, "danger-full-access")
		r := e.run(t, `set -e; echo pwned > "$OUT/new"; echo more >> "$OUT/existing"; rm "$OUT/existing"; mkdir "$OUT/d"; echo w > "$WS/w"`)
		requireExit(t, r, 0)
		requireNoDenials(t, r)
		requireContent(t, filepath.Join(e.out, "new"), "pwned\n")
		requireAbsent(t, filepath.Join(e.out, "existing"))
		requireContent(t, filepath.Join(e.ws, "w"), "w\n")
		if rep := requireReport(t, r); rep.Enforcement.Level != "none" {
			t.Errorf("enforcement.level = %q, want none", rep.Enforcement.Level)
		}
	})
}

// TestDevSinksWorkInEveryMode: /dev/null (and /dev/zero, /dev/full) are usable.
func TestDevSinksWorkInEveryMode(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, mode := range allModes {
			t.Run(mode, func(t *testing.T) {
				ws := id.workspace(t)
				r := id.run(t, runOpts{
					Flags: sandboxFlags(mode, ws),
					Argv: bash(`set -e; echo x > /dev/null; echo y >> /dev/null; head -c 4 /dev/zero > /dev/null
if echo z > /dev/full 2>/dev/null; then echo "full accepted a write"; exit 2; fi
cat /dev/null; echo ok`),
					Dir: ws,
				})
				requireExit(t, r, 0)
				if strings.TrimSpace(r.Stdout) != "ok" {
					t.Errorf("stdout = %q, want ok", r.Stdout)
				}
				requireNoDenials(t, r)
			})
		}
	})
}

// TestOrdinaryFailuresAreNotDenials: DAC denials and missing paths fail the
// command but produce no denial fact.
func TestOrdinaryFailuresAreNotDenials(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to create a file owned by another user in the workspace")
		}
		for _, mode := range []string{"workspace-write", "read-only"} {
			t.Run(mode, func(t *testing.T) {
				cases := []struct{ name, script string }{
					{"write to a file owned by another user, mode 0644 (DAC)", `echo x >> foreign`},
					{"write into a missing directory", `echo x > missing/dir/f`},
					{"read a missing file", `cat no-such-file`},
				}
				if mode == "read-only" {
					// in read-only, writes are policy denials: only the read case applies
					cases = cases[2:]
				}
				for _, c := range cases {
					t.Run(c.name, func(t *testing.T) {
						ws := id.workspace(t)
						foreign := filepath.Join(ws, "foreign")
						if err := os.WriteFile(foreign, []byte(existingContent), 0o644); err != nil {
							t.Fatal(err)
						}
						// owned by someone else than the identity: root for the user,
						// nobody for root (root runs without capabilities inside)
						owner := 0
						if id.isRoot() {
							owner = 65534
						}
						if err := os.Chown(foreign, owner, owner); err != nil {
							t.Fatal(err)
						}
						r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws), Argv: bash(c.script), Dir: ws})
						requireFailed(t, r)
						requireNoDenials(t, r)
						requireContent(t, foreign, existingContent)
						requireAbsent(t, filepath.Join(ws, "missing"))
					})
				}
			})
		}
	})
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
