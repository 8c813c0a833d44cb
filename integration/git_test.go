//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var gitEnv = []string{
	"GIT_AUTHOR_NAME=dsh it", "GIT_AUTHOR_EMAIL=it@example.invalid",
	"GIT_COMMITTER_NAME=dsh it", "GIT_COMMITTER_EMAIL=it@example.invalid",
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
}

// gitRepo makes a workspace with a real `git init`, run as the identity.
func gitRepo(t *testing.T, id identity) string {
	t.Helper()
	ws := id.workspace(t)
	id.git(t, ws, "init", "-q")
	return ws
}

func (id identity) git(t *testing.T, ws string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", ws}, args...)...)
	cmd.Env = id.env(gitEnv...)
	cmd.Dir = "/"
	cmd.SysProcAttr = id.sysProcAttr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %q: %v: %s", args, err, out)
	}
	return string(out)
}

// snapshot of the protected files to compare after the run.
type gitSnapshot struct {
	config string
	hooks  []string
}

func snapGit(t *testing.T, ws string) gitSnapshot {
	t.Helper()
	s := gitSnapshot{config: readFile(t, filepath.Join(ws, ".git/config"))}
	ents, err := os.ReadDir(filepath.Join(ws, ".git/hooks"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		s.hooks = append(s.hooks, e.Name())
	}
	return s
}

func (s gitSnapshot) requireUnchanged(t *testing.T, ws string) {
	t.Helper()
	requireContent(t, filepath.Join(ws, ".git/config"), s.config)
	ents, err := os.ReadDir(filepath.Join(ws, ".git/hooks"))
	if err != nil {
		t.Errorf(".git/hooks after the run: %v", err)
		return
	}
	var now []string
	for _, e := range ents {
		now = append(now, e.Name())
	}
	if strings.Join(now, ",") != strings.Join(s.hooks, ",") {
		t.Errorf(".git/hooks changed: before %v, after %v", s.hooks, now)
	}
	requireAbsent(t, filepath.Join(ws, ".git/hooks/pre-commit"))
	requireAbsent(t, filepath.Join(ws, ".git.bak"))
}

func TestGitWorksInWorkspaceWrite(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws := gitRepo(t, id)
		snap := snapGit(t, ws)
		r := id.run(t, runOpts{
			Flags: sandboxFlags("workspace-write", ws),
			Argv:  bash(`set -e; echo hello > a.txt; git add a.txt; git commit -q -m "first"; echo more >> a.txt; git commit -q -am second; git status --short; git log --oneline | wc -l`),
			Env:   gitEnv,
			Dir:   ws,
		})
		requireExit(t, r, 0)
		requireNoDenials(t, r)
		if n := strings.TrimSpace(id.git(t, ws, "rev-list", "--count", "HEAD")); n != "2" {
			t.Errorf("commits in the repo = %q, want 2", n)
		}
		snap.requireUnchanged(t, ws)
	})
}

func TestGitProtectedPathsDenied(t *testing.T) {
	type gitCase struct {
		name    string
		script  string
		ops     []string // acceptable ops
		targets []string // acceptable targets, relative to the workspace
		extra   func(t *testing.T, id identity, ws string)
	}
	cases := []gitCase{
		{
			name:   "plant .git/hooks/pre-commit",
			script: `printf '#!/bin/sh\ntouch /tmp/pwned\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`,
			ops:    []string{"write"}, targets: []string{".git/hooks/pre-commit"},
		},
		{
			name:   "overwrite an existing sample hook",
			script: `echo pwned > .git/hooks/pre-commit.sample`,
			ops:    []string{"write"}, targets: []string{".git/hooks/pre-commit.sample"},
		},
		{
			name:   "git config core.hooksPath",
			script: `git config core.hooksPath /tmp/x`,
			ops:    []string{"rename", "write"}, targets: []string{".git/config"},
			extra: func(t *testing.T, id identity, ws string) {
				if out := id.git(t, ws, "config", "--list", "--local"); strings.Contains(out, "hookspath") {
					t.Errorf("core.hooksPath got set: %s", out)
				}
			},
		},
		{
			name:   "git config core.fsmonitor",
			script: `git config core.fsmonitor "touch /tmp/pwned"`,
			ops:    []string{"rename", "write"}, targets: []string{".git/config"},
		},
		{
			name:   "append to .git/config",
			script: `printf '[core]\n\thooksPath = /tmp/x\n' >> .git/config`,
			ops:    []string{"write"}, targets: []string{".git/config"},
		},
		{
			name:   "remove .git/config",
			script: `rm -f .git/config`,
			ops:    []string{"remove"}, targets: []string{".git/config"},
		},
		{
			name:   "rename .git away and recreate hooks",
			script: `mv .git .git.bak && mkdir -p .git/hooks && cp -r .git.bak/* .git/ 2>/dev/null; printf '#!/bin/sh\ntouch /tmp/pwned\n' > .git/hooks/pre-commit`,
			ops:    []string{"rename"}, targets: []string{".git", ".git.bak"},
		},
		{
			name:   "rename .git/hooks away and recreate it",
			script: `mv .git/hooks .git/hooks.old && mkdir .git/hooks && echo pwned > .git/hooks/pre-commit`,
			ops:    []string{"rename"}, targets: []string{".git/hooks", ".git/hooks.old"},
			extra: func(t *testing.T, id identity, ws string) {
				requireAbsent(t, filepath.Join(ws, ".git/hooks.old"))
			},
		},
		{
			name:   "through a symlink in the workspace to .git/hooks",
			script: `ln -s .git/hooks h && echo pwned > h/pre-commit`,
			ops:    []string{"write"}, targets: []string{".git/hooks/pre-commit", "h/pre-commit"},
		},
		{
			name:   "through a hardlink of .git/config",
			script: `ln .git/config cfg; printf '[core]\n\thooksPath = /tmp/x\n' >> cfg; cmp -s cfg .git/config && exit 0; exit 1`,
			ops:    []string{"link", "write"}, targets: []string{".git/config", "cfg"},
		},
		{
			name:   "rename a file over .git/config",
			script: `printf '[core]\n\thooksPath = /tmp/x\n' > cfg && mv -f cfg .git/config`,
			ops:    []string{"rename"}, targets: []string{".git/config"},
		},
	}
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ws := gitRepo(t, id)
				snap := snapGit(t, ws)
				r := id.run(t, runOpts{
					Flags: sandboxFlags("workspace-write", ws),
					Argv:  bash(c.script),
					Env:   gitEnv,
					Dir:   ws,
				})
				requireFailed(t, r)
				snap.requireUnchanged(t, ws)
				if c.extra != nil {
					c.extra(t, id, ws)
				}
				requireOneOfDenials(t, r, "workspace-write", c.ops, prefixAll(ws, c.targets))
			})
		}
	})
}

func TestProtectFlag(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, form := range []string{"relative", "absolute"} {
			t.Run(form, func(t *testing.T) {
				ws := id.workspace(t)
				secret := filepath.Join(ws, "secret.txt")
				id.writeOwned(t, secret, existingContent, 0o644)
				dir := filepath.Join(ws, "locked")
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				_ = os.Chown(dir, int(id.uid), int(id.gid))
				p1, p2 := "secret.txt", "locked"
				if form == "absolute" {
					p1, p2 = secret, dir
				}
				flags := sandboxFlags("workspace-write", ws, "--protect", p1, "--protect", p2)
				for _, c := range []struct{ name, script, op, target string }{
					{"append to protected file", `echo x >> secret.txt`, "write", secret},
					{"remove protected file", `rm -f secret.txt`, "remove", secret},
					{"create in protected dir", `echo x > locked/new`, "write", filepath.Join(dir, "new")},
				} {
					t.Run(c.name, func(t *testing.T) {
						r := id.run(t, runOpts{Flags: flags, Argv: bash(c.script), Dir: ws})
						requireFailed(t, r)
						requireContent(t, secret, existingContent)
						requireAbsent(t, filepath.Join(dir, "new"))
						requireDenial(t, r, "workspace-write", c.op, c.target)
					})
				}
				t.Run("rest of the workspace stays writable", func(t *testing.T) {
					r := id.run(t, runOpts{Flags: flags, Argv: bash(`echo ok > other && cat secret.txt >/dev/null`), Dir: ws})
					requireExit(t, r, 0)
					requireContent(t, filepath.Join(ws, "other"), "ok\n")
					requireNoDenials(t, r)
				})
			})
		}
	})
}

// TestSymlinkedHooksProtected: a .git/hooks that is a symlink (to a shared
// hooks directory that is itself writable) is protected where it points, and
// the link cannot be replaced by a real directory holding a planted hook.
func TestSymlinkedHooksProtected(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws := gitRepo(t, id)
		shared := id.outside(t)
		hooks := filepath.Join(ws, ".git", "hooks")
		if err := os.RemoveAll(hooks); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(shared, hooks); err != nil {
			t.Fatal(err)
		}
		_ = os.Lchown(hooks, int(id.uid), int(id.gid))
		flags := sandboxFlags("workspace-write", ws, "--allow-write", shared)
		for _, c := range []struct{ name, script, op, target string }{
			{"write through the link", `echo evil > .git/hooks/pre-commit`, "write", filepath.Join(shared, "pre-commit")},
			{"replace the link", `rm .git/hooks && mkdir .git/hooks && echo evil > .git/hooks/pre-commit`, "remove", hooks},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := id.run(t, runOpts{Flags: flags, Argv: bash(c.script), Dir: ws})
				requireFailed(t, r)
				if dest, err := os.Readlink(hooks); err != nil || dest != shared {
					t.Errorf(".git/hooks is no longer the link to %s: %q %v", shared, dest, err)
				}
				requireAbsent(t, filepath.Join(shared, "pre-commit"))
				requireDenial(t, r, "workspace-write", c.op, c.target)
			})
		}
	})
}

func prefixAll(ws string, rel []string) []string {
	out := make([]string, len(rel))
	for i, r := range rel {
		out[i] = filepath.Join(ws, r)
	}
	return out
}

// requireOneOfDenials: a denial with one of the ops and one of the targets.
func requireOneOfDenials(t *testing.T, r result, mode string, ops, targets []string) {
	t.Helper()
	rep := requireReport(t, r)
	for _, d := range rep.Denials {
		if contains(ops, d.Op) && contains(targets, d.target()) {
			requireDenial(t, r, mode, d.Op, d.target()) // checks errno/syscall/stderr line
			return
		}
	}
	t.Errorf("report lacks a denial with op in %q and target in %q; denials=%v", ops, targets, rep.Denials)
}
