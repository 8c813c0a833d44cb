//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A kernel without seccomp user notification (before 5.0) under Docker's
// default seccomp profile, simulated by `degrade docker+nonotify`: no user
// namespace (so no mount view) and no supervisor (no user notification).
// Landlock is the only filesystem layer, and it alone must keep the
// protected paths read-only: it leaves them out of the writable roots.
// (Docker's profile on a current kernel has a supervisor: docker_test.go.)

var degradedNoNotify = degradation{
	name: "no user notification, docker seccomp profile",
	wrap: func() []string { return []string{degradeBin, "docker+nonotify"} },
	need: func(t *testing.T, id identity) {
		needHelper(t)
		requireLandlock(t) // the only filesystem layer left
	},
}

// noNotifyMissing is the exact list of what a confined mode lacks there.
func noNotifyMissing(t *testing.T) []string {
	abi := requireLandlock(t)
	m := []string{"metadata-writes", "process-visibility"}
	if abi < 6 {
		m = append(m, "signal-isolation")
	}
	// No "truncate" below ABI 3: the filter refuses truncate(2) and
	// non-writable O_TRUNC opens in the kernel (openguard_test.go).
	m = append(m, "ipc-isolation")
	return append(m, "denial-facts", "secret-masks-mount")
}

func TestNoNotifyProbeExact(t *testing.T) {
	d := degradedNoNotify
	forEachIdentity(t, func(t *testing.T, id identity) {
		d.need(t, id)
		r := id.run(t, runOpts{Wrap: d.wrap(), Flags: []string{"--probe", "--json"}, NoReport: true, Dir: id.workspace(t)})
		requireExit(t, r, 0)
		p := parseProbe(t, r)
		if !p.Seccomp.Available || p.Seccomp.Notify {
			t.Errorf("seccomp = %+v, want available without user notification", p.Seccomp)
		}
		if !p.Confined {
			t.Errorf("confined = false")
		}
		want := noNotifyMissing(t)
		for _, m := range confinedModes {
			pm := p.Modes[m]
			if pm.Enforcement != "partial" || !slices.Equal(withoutLimits(pm.Missing), want) { // limits: limits_test.go
				t.Errorf("modes[%s] = %+v, want partial, missing %v", m, pm, want)
			}
			if contains(pm.Layers, "seccomp-notify") || contains(pm.Layers, "mount-view") || !contains(pm.Layers, "landlock") {
				t.Errorf("modes[%s].layers = %v, want landlock, no mount view, no seccomp-notify", m, pm.Layers)
			}
		}
	})
}

// TestNoNotifyProtectedPaths: every way of changing .git/hooks, .git/config
// or a --protect path is refused by Landlock alone, and the files are
// unchanged afterwards; writes elsewhere in the workspace land.
func TestNoNotifyProtectedPaths(t *testing.T) {
	t.Parallel()
	d := degradedNoNotify
	cases := []struct{ name, script string }{
		{"plant .git/hooks/pre-commit", `printf '#!/bin/sh\ntouch /tmp/pwned\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`},
		{"overwrite a sample hook", `echo pwned > .git/hooks/pre-commit.sample`},
		{"activate a sample hook by hardlink", `ln .git/hooks/pre-commit.sample .git/hooks/pre-commit`},
		{"activate a sample hook by rename", `mv .git/hooks/pre-commit.sample .git/hooks/pre-commit`},
		{"symlink a hook", `printf '#!/bin/sh\ntouch /tmp/pwned\n' > work/p && chmod +x work/p && ln -s ../../work/p .git/hooks/pre-commit`},
		{"move a payload into hooks", `printf '#!/bin/sh\ntouch /tmp/pwned\n' > work/p && chmod +x work/p && mv work/p .git/hooks/pre-commit`},
		{"write hooks through a symlink", `ln -s ../.git/hooks work/h && echo pwned > work/h/pre-commit`},
		{"git config core.hooksPath", `git config core.hooksPath /tmp/x`},
		{"append to .git/config", `printf '[core]\n\thooksPath = /tmp/x\n' >> .git/config`},
		{"truncate .git/config", `truncate -s 0 .git/config`},
		{"remove .git/config", `rm -f .git/config`},
		{"rename a file over .git/config", `printf '[core]\n\thooksPath = /tmp/x\n' > work/cfg && mv -f work/cfg .git/config`},
		{"hardlink .git/config out and write it", `ln .git/config work/cfg && printf '[core]\n\thooksPath = /tmp/x\n' >> work/cfg`},
		{"rename .git away and recreate it", `mv .git .git.bak; mkdir -p .git/hooks && printf '#!/bin/sh\ntouch /tmp/pwned\n' > .git/hooks/pre-commit`},
		{"rename .git/hooks away and recreate it", `mv .git/hooks .git/hooks.old; mkdir .git/hooks && echo pwned > .git/hooks/pre-commit`},
		{"remove .git/hooks", `rm -rf .git/hooks`},
		{"write the --protect path", `echo pwned > secret/key`},
		{"replace the --protect path", `rm -f secret/key; echo pwned > work/k && mv work/k secret/key`},
		{"rename the --protect directory away", `mv secret work/secret && mkdir secret && echo pwned > secret/key`},
	}
	forEachIdentity(t, func(t *testing.T, id identity) {
		d.need(t, id)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ws := gitRepo(t, id)
				id.mkdirAt(t, filepath.Join(ws, "work"))
				id.mkdirAt(t, filepath.Join(ws, "secret"))
				id.writeOwned(t, filepath.Join(ws, "secret/key"), existingContent, 0o644)
				snap := snapGit(t, ws)
				r := id.run(t, runOpts{
					Wrap:  d.wrap(),
					Flags: sandboxFlags("workspace-write", ws, "--protect", "secret"),
					Argv:  bash(c.script + `; echo landed > work/ok`),
					Env:   gitEnv,
					Dir:   ws,
				})
				snap.requireUnchanged(t, ws)
				requireContent(t, filepath.Join(ws, "secret/key"), existingContent)
				requireAbsent(t, filepath.Join(ws, ".git/hooks.old"))
				requireAbsent(t, filepath.Join(ws, "work/secret"))
				if out := id.git(t, ws, "config", "--list", "--local"); strings.Contains(out, "hookspath") {
					t.Errorf("core.hooksPath got set: %s", out)
				}
				requireContent(t, filepath.Join(ws, "work/ok"), "landed\n")
				rep := requireReport(t, r)
				if !slices.Equal(withoutLimits(rep.Enforcement.Missing), noNotifyMissing(t)) {
					t.Errorf("report missing = %v, want %v", rep.Enforcement.Missing, noNotifyMissing(t))
				}
			})
		}
	})
}

// TestNoNotifyMissingProtectedPath: in a workspace that is not a repository
// yet, a hook planted in a new .git, or in a repository moved into place,
// never stays active (the post-run audit quarantines it) — also without
// user notification.
func TestNoNotifyMissingProtectedPath(t *testing.T) {
	d := degradedNoNotify
	for _, c := range []struct{ name, script string }{
		{"mkdir .git/hooks", `mkdir -p .git/hooks && printf '#!/bin/sh\ntouch /tmp/pwned\n' > .git/hooks/pre-commit`},
		{"mv a repository to .git", `git init -q work/y && printf '#!/bin/sh\ntouch /tmp/pwned\n' > work/y/.git/hooks/pre-commit && mv work/y/.git .git`},
	} {
		t.Run(c.name, func(t *testing.T) {
			forEachIdentity(t, func(t *testing.T, id identity) {
				d.need(t, id)
				ws := id.workspace(t)
				id.mkdirAt(t, filepath.Join(ws, "work"))
				r := id.run(t, runOpts{Wrap: d.wrap(), Flags: sandboxFlags("workspace-write", ws), Argv: bash(c.script), Env: gitEnv, Dir: ws})
				// A workspace that is not a repository has no protected git
				// paths (git init works); the post-run audit quarantines
				// the planted hook, so no git ever runs it.
				hook := filepath.Join(ws, ".git/hooks/pre-commit")
				requireAbsent(t, hook)
				if exists(filepath.Join(ws, ".git")) {
					requireDenial(t, r, "workspace-write", "git-control", hook)
				} else {
					requireFailed(t, r)
				}
			})
		})
	}
}

// TestNoNotifyGitReads: git reads a repository, and the work tree below the
// workspace is writable; what Landlock cannot give there (git's own writes
// directly in .git, new entries directly in the workspace) fails with
// EACCES and changes nothing.
func TestNoNotifyGitReads(t *testing.T) {
	d := degradedNoNotify
	forEachIdentity(t, func(t *testing.T, id identity) {
		d.need(t, id)
		ws := gitRepo(t, id)
		id.mkdirAt(t, filepath.Join(ws, "src"))
		id.writeOwned(t, filepath.Join(ws, "src/a.txt"), "one\n", 0o644)
		id.writeOwned(t, filepath.Join(ws, "top.txt"), "top\n", 0o644)
		id.git(t, ws, "add", "-A")
		id.git(t, ws, "commit", "-q", "-m", "first")
		head := id.git(t, ws, "rev-parse", "HEAD")
		snap := snapGit(t, ws)
		r := id.run(t, runOpts{
			Wrap:  d.wrap(),
			Flags: sandboxFlags("workspace-write", ws),
			Argv: bash(`set -e; git log --oneline | grep -q first; echo two >> src/a.txt; echo more >> top.txt
git status --short | grep -q 'M src/a.txt'; git diff --stat | grep -q 'src/a.txt'; git show --stat HEAD >/dev/null
mkdir -p src/new && echo n > src/new/f; mv src/new/f src/new/g; rm src/new/g
if git commit -qam second 2>/dev/null; then exit 3; fi
if echo x > newtop 2>/dev/null; then exit 4; fi
echo ok`),
			Env: gitEnv,
			Dir: ws,
		})
		requireExit(t, r, 0)
		if !hasLine(r.Stdout, "ok") {
			t.Errorf("stdout = %q, want ok", r.Stdout)
		}
		requireContent(t, filepath.Join(ws, "src/a.txt"), "one\ntwo\n")
		requireContent(t, filepath.Join(ws, "top.txt"), "top\nmore\n")
		requireAbsent(t, filepath.Join(ws, "newtop"))
		if now := id.git(t, ws, "rev-parse", "HEAD"); now != head {
			t.Errorf("HEAD moved: %s -> %s", head, now)
		}
		if _, err := os.Stat(filepath.Join(ws, ".git/index.lock")); err == nil {
			t.Errorf(".git/index.lock left behind")
		}
		snap.requireUnchanged(t, ws)
	})
}
