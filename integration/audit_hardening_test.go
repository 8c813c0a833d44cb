//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/integration/internal/harnessproto"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
)

// The post-run audit against a command that hides what it plants from it:
// a decoy git directory over a real one, a git directory git accepts but
// that does not look like one, a repository in git's own data, directories
// the audit cannot read, and the files a repository's own config makes git
// run in its work tree. Each case runs in the workspace and in a
// transaction (committed afterwards), as root and as the test user; then
// the host's git runs where the user would, and the payload — which
// touches a marker outside every writable root — must not have run, and
// the report must say what was set aside.

// auditCase is one attack on the audit.
type auditCase struct {
	name   string
	setup  func(t *testing.T, id identity, ws string) // on the host, before the run
	script string                                     // $M is the marker, $HOOK a hook that touches it
	victim func(t *testing.T, id identity, ws string) // the host's git afterwards
	// denied returns the paths one of which a denial must name (rel to
	// the workspace), with its op.
	denied func(id identity) (op string, rels []string)
}

// auditGitAt returns a victim that runs the host's git in the workspace's dir
// with each of args.
func auditGitAt(dir string, args ...[]string) func(t *testing.T, id identity, ws string) {
	return func(t *testing.T, id identity, ws string) {
		for _, a := range args {
			id.hostGit(t, filepath.Join(ws, dir), a...)
		}
	}
}

func auditControl(rels ...string) func(identity) (string, []string) {
	return func(identity) (string, []string) { return "git-control", rels }
}

// auditUnreadable: as root the audit reads the directory whatever its mode, and
// finds what is in it; as the user it sets the directory aside.
func auditUnreadable(dir string, inside ...string) func(identity) (string, []string) {
	return func(id identity) (string, []string) {
		if id.isRoot() {
			return "git-control", inside
		}
		return "git-control", []string{dir}
	}
}

var (
	auditStatus = []string{"status"}
	auditCommit = []string{"commit", "-q", "--allow-empty", "-m", "host"}
)

func auditCases() []auditCase {
	repo := func(t *testing.T, id identity, ws string) {
		id.git(t, ws, "init", "-q")
		id.git(t, ws, "commit", "-q", "--allow-empty", "-m", "start")
	}
	nested := func(t *testing.T, id identity, ws string) {
		id.git(t, ws, "init", "-q", "sub")
		id.git(t, filepath.Join(ws, "sub"), "commit", "-q", "--allow-empty", "-m", "start")
	}
	return []auditCase{
		{
			name:   "decoy git directory over a nested repository",
			script: `git init -q sub && git -C sub config core.fsmonitor "touch $M; false" && echo ref > sub/HEAD && mkdir sub/objects sub/refs`,
			victim: auditGitAt("sub", auditStatus),
			denied: auditControl("sub/.git/config"),
		},
		{
			name:  "decoy at the top over nested repositories and .git/modules",
			setup: repo,
			script: `echo 'ref: refs/heads/main' > HEAD && mkdir objects refs
				git init -q n && git -C n config core.fsmonitor "touch $M; false"
				git init -q --bare .git/modules/m && mkdir m && echo 'gitdir: ../.git/modules/m' > m/.git
				git -C .git/modules/m config core.bare false && git -C .git/modules/m config core.worktree ../../../m
				git -C .git/modules/m config core.fsmonitor "touch $M; false"`,
			victim: func(t *testing.T, id identity, ws string) {
				auditGitAt("n", auditStatus)(t, id, ws)
				auditGitAt("m", auditStatus)(t, id, ws)
			},
			denied: auditControl("n/.git/config", ".git/modules/m/config"),
		},
		{
			name: "git directory whose objects is a symlink",
			script: `mkdir -p sub/refs && echo 'ref: refs/heads/main' > sub/HEAD && ln -s /usr sub/objects
				printf '[core]\n\trepositoryformatversion = 0\n\tworktree = ..\n\tfsmonitor = touch %s; false\n' "$M" > sub/config`,
			victim: auditGitAt("sub", auditStatus),
			denied: auditControl("sub/config"),
		},
		{
			name:  "repository in git's data reached by a symlink",
			setup: repo,
			script: `mkdir -p .git/objects/zz && git init -q .git/objects/zz/r && git -C .git/objects/zz/r config core.fsmonitor "touch $M; false"
				ln -s .git/objects/zz/r lure`,
			victim: auditGitAt("lure", auditStatus),
			denied: auditControl(".git/objects/zz/r/.git/config"),
		},
		{
			name:   "unlistable directory over a repository",
			script: `mkdir d && git init -q d/sub && git -C d/sub config core.fsmonitor "touch $M; false" && chmod 0311 d`,
			victim: auditGitAt("d/sub", auditStatus),
			denied: auditUnreadable("d", "d/sub/.git/config"),
		},
		{
			name:   "unlistable hooks directory",
			setup:  nested,
			script: `printf '%s' "$HOOK" > sub/.git/hooks/pre-commit && chmod +x sub/.git/hooks/pre-commit && chmod 0311 sub/.git/hooks`,
			victim: auditGitAt("sub", auditCommit),
			denied: auditUnreadable("sub/.git/hooks", "sub/.git/hooks/pre-commit"),
		},
		{
			name: "hook in the repository's core.hooksPath",
			setup: func(t *testing.T, id identity, ws string) {
				repo(t, id, ws)
				id.git(t, ws, "config", "core.hooksPath", ".githooks")
				id.mkdirAt(t, filepath.Join(ws, ".githooks"))
				id.writeOwned(t, filepath.Join(ws, ".githooks/pre-commit"), "#!/bin/sh\ntrue\n", 0o755)
			},
			script: `printf '%s' "$HOOK" > .githooks/pre-commit && printf '%s' "$HOOK" > .githooks/post-commit && chmod +x .githooks/*`,
			victim: auditGitAt(".", auditCommit),
			denied: auditControl(".githooks/pre-commit", ".githooks/post-commit"),
		},
		{
			name: "missing core.hooksPath directory",
			setup: func(t *testing.T, id identity, ws string) {
				repo(t, id, ws)
				id.git(t, ws, "config", "core.hooksPath", ".husky/_")
			},
			script: `mkdir -p .husky/_ && printf '%s' "$HOOK" > .husky/_/pre-commit && chmod +x .husky/_/pre-commit`,
			victim: auditGitAt(".", auditCommit),
			denied: auditControl(".husky/_"),
		},
		{
			name: "config the repository's config includes",
			setup: func(t *testing.T, id identity, ws string) {
				repo(t, id, ws)
				id.git(t, ws, "config", "include.path", "../.gitconfig.local")
				id.writeOwned(t, filepath.Join(ws, ".gitconfig.local"), "[user]\n\tname = me\n", 0o644)
			},
			script: `printf '[core]\n\tfsmonitor = touch %s; false\n' "$M" >> .gitconfig.local`,
			victim: auditGitAt(".", auditStatus),
			denied: auditControl(".gitconfig.local"),
		},
		{
			name: "program of a filter driver that attributes select",
			setup: func(t *testing.T, id identity, ws string) {
				repo(t, id, ws)
				id.git(t, ws, "config", "filter.x.clean", "./tools/clean")
				id.mkdirAt(t, filepath.Join(ws, "tools"))
				id.writeOwned(t, filepath.Join(ws, "tools/clean"), "#!/bin/sh\ncat\n", 0o755)
				id.writeOwned(t, filepath.Join(ws, ".gitattributes"), "*.txt filter=x\n", 0o644)
			},
			script: `printf '#!/bin/sh\ntouch %s\ncat\n' "$M" > tools/clean`,
			victim: func(t *testing.T, id identity, ws string) {
				id.writeOwned(t, filepath.Join(ws, "a.txt"), "a\n", 0o644)
				id.hostGit(t, ws, "add", "a.txt")
			},
			denied: auditControl("tools/clean"),
		},
	}
}

// TestAuditHardening: in the workspace and in a transaction, as root and as
// the test user, what the command planted is set aside and reported, and
// the host's git does not run it.
func TestAuditHardening(t *testing.T) {
	for _, tx := range []bool{false, true} {
		t.Run(map[bool]string{false: "workspace", true: "transaction"}[tx], func(t *testing.T) {
			forEachIdentity(t, func(t *testing.T, id identity) {
				for _, c := range auditCases() {
					t.Run(c.name, func(t *testing.T) { runAuditCase(t, id, c, tx) })
				}
			})
		})
	}
}

func runAuditCase(t *testing.T, id identity, c auditCase, tx bool) {
	var ws, txDir string
	flags := []string{}
	if tx {
		// (Outside every writable root, as in the transaction tests.)
		ws = id.mkdirOwned(t, "/var/tmp", "dsh-it-ws-")
		txDir = filepath.Join(id.mkdirOwned(t, "/var/tmp", "dsh-it-tx-"), "tx")
		flags = append(flags, "--transaction", txDir)
	} else {
		ws = id.workspace(t)
	}
	if c.setup != nil {
		c.setup(t, id, ws)
	}
	if tx {
		skipWithoutOverlay(t, id, ws, txDir)
	}
	marker := filepath.Join(id.outside(t), "pwned")
	hook := fmt.Sprintf("#!/bin/sh\ntouch %s\n", marker)
	r := id.run(t, runOpts{
		Flags: sandboxFlags("workspace-write", ws, flags...),
		Argv:  bash(c.script),
		Env:   append([]string{"M=" + marker, "HOOK=" + hook}, gitEnv...),
		Dir:   ws,
	})
	requireExit(t, r, 0)
	requireAbsent(t, marker) // the command itself cannot reach it
	op, rels := c.denied(id)
	var paths []string
	for _, rel := range rels {
		paths = append(paths, filepath.Join(ws, rel))
	}
	requireAuditDenial(t, r, op, paths...)
	if tx {
		cr := id.run(t, runOpts{Flags: []string{"commit", txDir}, NoReport: true})
		if cr.Exit != 0 {
			t.Fatalf("commit: %v", cr)
		}
	}
	c.victim(t, id, ws)
	requireAbsent(t, marker)
}

// requireAuditDenial asserts a post-run denial with the op and one of the
// paths, and its stderr line (which may give a reason: "unreadable").
func requireAuditDenial(t *testing.T, r result, op string, paths ...string) {
	t.Helper()
	rep := requireReport(t, r)
	for _, d := range rep.Denials {
		for _, p := range paths {
			if d.Op != op || d.Path != p {
				continue
			}
			if d.Syscall != "post-run" || d.Errno != "EPERM" {
				t.Errorf("denial %v: want syscall post-run, errno EPERM (set aside)", d)
			}
			line := fmt.Sprintf("%sdenied %s %s (workspace-write mode", cliPrefix, op, p)
			found := false
			for _, l := range lines(r.Stderr) {
				found = found || strings.HasPrefix(l, line)
			}
			if !found {
				t.Errorf("stderr lacks a line starting %q; stderr=%q", line, r.Stderr)
			}
			return
		}
	}
	t.Errorf("report lacks a %s denial of one of %q; denials=%v", op, paths, rep.Denials)
}

// TestAuditKeepsOrdinaryGit: what git itself makes in a command — a new
// repository, commits, branches, a worktree of the workspace's repository
// and of a new one, a submodule, a clone — stays, with no denial and
// nothing set aside, in the workspace and in a transaction; the host's git
// then uses it.
func TestAuditKeepsOrdinaryGit(t *testing.T) {
	script := `set -e
		git worktree add -q wt0
		git init -q top; cd top; echo a > a; git add a; git commit -q -m a
		git branch b; git worktree add -q ../wt b; git -C ../wt commit -q --allow-empty -m w
		git init -q ../lib; git -C ../lib commit -q --allow-empty -m l
		git -c protocol.file.allow=always submodule add -q ../lib lib; git commit -q -m sub
		git clone -q . ../clone`
	for _, tx := range []bool{false, true} {
		t.Run(map[bool]string{false: "workspace", true: "transaction"}[tx], func(t *testing.T) {
			forEachIdentity(t, func(t *testing.T, id identity) {
				var ws, txDir string
				flags := []string{}
				if tx {
					ws = id.mkdirOwned(t, "/var/tmp", "dsh-it-ws-")
					txDir = filepath.Join(id.mkdirOwned(t, "/var/tmp", "dsh-it-tx-"), "tx")
					flags = append(flags, "--transaction", txDir)
				} else {
					ws = id.workspace(t)
				}
				id.git(t, ws, "init", "-q")
				id.git(t, ws, "commit", "-q", "--allow-empty", "-m", "start")
				if tx {
					skipWithoutOverlay(t, id, ws, txDir)
				}
				r := id.run(t, runOpts{
					Flags: sandboxFlags("workspace-write", ws, flags...),
					Argv:  bash(script),
					Env:   gitEnv,
					Dir:   ws,
				})
				requireExit(t, r, 0)
				requireNoDenials(t, r)
				if tx {
					cr := id.run(t, runOpts{Flags: []string{"commit", txDir}, NoReport: true})
					if cr.Exit != 0 {
						t.Fatalf("commit: %v", cr)
					}
				}
				requireNoQuarantine(t, ws)
				for _, dir := range []string{"wt0", "top", "wt", "top/lib", "clone"} {
					id.git(t, filepath.Join(ws, dir), "status", "--short")
				}
				if out := id.git(t, filepath.Join(ws, "top"), "submodule", "status"); !strings.Contains(out, "lib") {
					t.Errorf("submodule status = %q", out)
				}
				if _, err := os.Stat(filepath.Join(ws, "wt/.git")); err != nil {
					t.Errorf("the worktree lost its .git: %v", err)
				}
			})
		})
	}
}

// TestAuditCacheAcrossCommands: an executor keeps what its audits read of
// the workspace's directories from one command to the next, and takes a
// directory unchanged since from there (sandbox.AuditCache). Here every
// directory was last changed longer ago than the cache's settle time, so the
// first command's walks record them all and the next command's audit lists
// only what it changed: a repository made in a directory deep in the tree
// and a .git file dropped next to old files are set aside all the same, and
// the host's git runs neither. Then the same in directories made by the
// command just before, which only the executor's watches vouch for.
func TestAuditCacheAcrossCommands(t *testing.T) {
	needHarness(t)
	forEachIdentity(t, func(t *testing.T, id identity) {
		cfg := id.execConfig(t, "workspace-write")
		ws := cfg.Workspace
		id.git(t, ws, "init", "-q")
		for _, d := range []string{"deep", "deep/a", "deep/a/b", "deep/c", "deep/d", "deep/d/e", "deep/d/e/f"} {
			id.mkdirAt(t, filepath.Join(ws, d))
		}
		id.writeOwned(t, filepath.Join(ws, "deep/c/old.txt"), "old\n", 0o644)
		id.git(t, ws, "add", "-A")
		id.git(t, ws, "commit", "-q", "-m", "fixture")
		waitSettled(t, ws, 2*time.Second)

		marker := filepath.Join(id.outside(t), "pwned")
		plant := `set -e
			git init -q deep/a/b
			git -C deep/a/b config core.fsmonitor "touch $M; false"
			printf 'gitdir: /var/tmp\n' > deep/c/.git`
		env := map[string]string{"M": marker}
		for _, kv := range gitEnv {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		// And in directories made a moment before (which only the
		// executor's watches vouch for, their change times too recent).
		plantFresh := `set -e
			git init -q fresh/x
			git -C fresh/x config core.fsmonitor "touch $M; false"`
		out := id.harness(t, harnessproto.Spec{Config: cfg, Action: "sequence", Requests: []harnessproto.Request{
			{Command: "true"}, {Command: "true"}, {Command: plant, Env: env},
			{Command: "mkdir -p fresh/x/y && touch fresh/x/f"}, {Command: "true"}, {Command: plantFresh, Env: env},
		}})
		if len(out.Results) != 6 {
			t.Fatalf("want 6 outcomes, got %+v", out)
		}
		for _, i := range []int{0, 1, 3, 4} {
			o := out.Results[i]
			if r := requireResult(t, o); len(r.Sandbox.Denials) != 0 {
				t.Errorf("a command that changed nothing has denials %+v", r.Sandbox.Denials)
			}
		}
		r := requireResult(t, out.Results[2])
		if r.ExitCode != 0 {
			t.Fatalf("the planting command failed: %+v", r)
		}
		fresh := requireResult(t, out.Results[5])
		if fresh.ExitCode != 0 {
			t.Fatalf("the planting command failed: %+v", fresh)
		}
		r.Sandbox.Denials = append(r.Sandbox.Denials, fresh.Sandbox.Denials...)
		for _, rel := range []string{"deep/a/b/.git/config", "deep/c/.git", "fresh/x/.git/config"} {
			p := filepath.Join(ws, rel)
			if !slices.ContainsFunc(r.Sandbox.Denials, func(d sandbox.Denial) bool {
				return d.Op == "git-control" && d.Path == p && d.Syscall == "post-run"
			}) {
				t.Errorf("no post-run git-control denial of %s: %+v", p, r.Sandbox.Denials)
			}
			if exists(p) {
				t.Errorf("%s is still in place", p)
			}
		}
		id.hostGit(t, filepath.Join(ws, "deep/a/b"), "status")
		id.hostGit(t, filepath.Join(ws, "deep/c"), "status")
		id.hostGit(t, filepath.Join(ws, "fresh/x"), "status")
		requireAbsent(t, marker)
	})
}

// waitSettled waits until every directory under root was last changed more
// than settle ago (by the clock the kernel stamps change times with).
func waitSettled(t *testing.T, root string, settle time.Duration) {
	t.Helper()
	var newest time.Time
	err := filepath.Walk(root, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.IsDir() {
			if c := time.Unix(st.Ctim.Unix()); c.After(newest) {
				newest = c
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// (A wait for the clock to pass a point, which no load can shorten.)
	time.Sleep(time.Until(newest.Add(settle + 100*time.Millisecond)))
}
