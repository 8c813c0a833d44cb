//go:build linux

package audit

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// env is a workspace, and where a command's writes land: the workspace
// itself, or a transaction's upper layer over it (a plain directory here:
// what the audit reads of one).
type env struct {
	t      *testing.T
	ws, at string
	audits []*Audit
	// cache, when not nil, is the walks' cache, filled by an earlier
	// command that changed nothing (see start).
	cache *Cache
}

// flavors are the ways a table test audits a command: the workspace read
// whole, a transaction's upper layer, the workspace with a cache of an
// earlier command's walks (every directory but what the command changes
// taken from there, by its change time), and the same with a cache that
// watches (by the index alone: no change time vouches for anything).
var flavors = []string{"workspace", "transaction", "cached", "watched"}

func newFlavor(t *testing.T, flavor string) *env {
	e := newEnv(t, flavor == "transaction")
	switch flavor {
	case "cached":
		e.cache = &Cache{settle: time.Nanosecond}
	case "watched":
		e.cache = &Cache{watch: true, settle: time.Hour}
		t.Cleanup(func() { e.cache.Close() })
	}
	return e
}

func newEnv(t *testing.T, over bool) *env {
	e := &env{t: t, ws: tempDir(t)}
	e.at = e.ws
	if over {
		e.at = tempDir(t)
	}
	return e
}

func (e *env) over() bool { return e.at != e.ws }

func (e *env) start() {
	e.t.Helper()
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: e.ws})
	require.NoError(e.t, err)
	tick := func() {
		if e.cache != nil && !e.cache.watch {
			waitTick(e.t)
		}
	}
	if e.cache != nil {
		// An earlier command, which changed nothing; then this one,
		// which takes what did not change from the cache, and whose
		// changes come a clock tick after its walk (see waitTick).
		tick()
		audits, err := Start(p, nil, e.cache)
		require.NoError(e.t, err)
		log := facts.NewLog()
		Finish(audits, log, false)
		require.Empty(e.t, log.List())
		tick()
	}
	if e.over() {
		e.audits, err = StartOver(p, nil, e.ws, e.at, e.cache)
	} else {
		e.audits, err = Start(p, nil, e.cache)
	}
	require.NoError(e.t, err)
	tick()
}

// waitTick waits until a change made now gets a later change time than
// any made before the call: on a kernel with coarse timestamps, until the
// clock has ticked. (A test cache records every directory changed before
// its walk: a change within the same tick would not show, which a real
// cache's settle time rules out.)
func waitTick(t *testing.T) {
	t.Helper()
	now := time.Now()
	probe := filepath.Join(t.TempDir(), "tick")
	for range 100000 {
		require.NoError(t, os.WriteFile(probe, nil, 0o600))
		require.NoError(t, os.Chmod(probe, 0o600)) // (a change of ctime, whatever the write did)
		var st syscall.Stat_t
		require.NoError(t, syscall.Stat(probe, &st))
		if time.Unix(st.Ctim.Unix()).After(now) {
			return
		}
		runtime.Gosched()
	}
	t.Fatal("the clock gives no later change time")
}

// finish runs Finish and returns its denials, "op rel" (rel to the
// workspace) with ", unreadable" for those it could not read, sorted.
func (e *env) finish(kernelHeld bool) []string {
	e.t.Helper()
	log := facts.NewLog()
	Finish(e.audits, log, kernelHeld)
	var out []string
	for _, d := range log.List() {
		rel, err := filepath.Rel(e.ws, d.Path)
		require.NoError(e.t, err)
		s := d.Op + " " + rel
		if d.Reason != "" {
			s += ", " + d.Reason
		}
		if d.Errno != "EPERM" {
			s += " (" + d.Errno + ")"
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// requireGone fails unless rel is no longer where the command left it: set
// aside in the workspace, or removed from the upper layer.
func (e *env) requireGone(rel string) {
	e.t.Helper()
	_, err := os.Lstat(filepath.Join(e.at, rel))
	assert.ErrorIs(e.t, err, os.ErrNotExist, "%s is still in place", rel)
	if !e.over() {
		_, err = os.Lstat(filepath.Join(e.ws, rel+".dsh-quarantined"))
		assert.NoError(e.t, err, "%s is set aside, not lost", rel)
	}
}

func tempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "audit-")
	require.NoError(t, err)
	t.Cleanup(func() { forceRemoveAll(d) })
	d, err = filepath.EvalSymlinks(d)
	require.NoError(t, err)
	return d
}

func write(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o755))
}

func mkdirs(t *testing.T, dir string, rels ...string) {
	t.Helper()
	for _, r := range rels {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, r), 0o755))
	}
}

func symlink(t *testing.T, target, dir, rel string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755))
	require.NoError(t, os.Symlink(target, filepath.Join(dir, rel)))
}

// gitDir makes a git directory at rel (what git init leaves, hooks aside)
// with config.
func gitDir(t *testing.T, dir, rel, config string) {
	t.Helper()
	mkdirs(t, dir, rel+"/objects/info", rel+"/refs/heads", rel+"/hooks")
	write(t, dir, rel+"/HEAD", "ref: refs/heads/main\n")
	write(t, dir, rel+"/config", config)
}

const (
	safeConfig  = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
	fsmonitor   = "[core]\n\tfsmonitor = touch /tmp/pwned; false\n"
	decoyConfig = "[core]\n\trepositoryformatversion = 0\n\tworktree = ..\n\tfsmonitor = touch /tmp/pwned; false\n"
)

// TestScanGitFindsEveryRepository: the walk finds the control entries of
// repositories at any depth (beyond the depth where it stops holding
// descriptors too), under a git directory (a decoy one, git's data), of
// gitfiles and of what they name, of a git directory whose objects is a
// symlink; and never follows a symlink.
func TestScanGitFindsEveryRepository(t *testing.T) {
	root := tempDir(t)
	outside := tempDir(t)
	gitDir(t, root, ".git", safeConfig)
	write(t, root, ".git/hooks/pre-commit", "#!/bin/sh\n")
	deep := strings.Repeat("d/", openDepth+6) + "repo/.git"
	gitDir(t, root, deep, safeConfig)
	write(t, root, deep+"/hooks/post-checkout", "#!/bin/sh\n")
	write(t, root, "sub/.git", "gitdir: ../elsewhere\n")
	write(t, root, "elsewhere/config", fsmonitor) // no HEAD: named by a gitfile
	gitDir(t, root, ".git/modules/m", safeConfig)
	gitDir(t, root, ".git/objects/ab/.git", safeConfig)
	write(t, root, "decoy/HEAD", "ref\n")
	mkdirs(t, root, "decoy/objects", "decoy/refs")
	gitDir(t, root, "decoy/.git", fsmonitor)
	gitDir(t, root, "decoy/objects/n/.git", fsmonitor)
	write(t, root, "bare/HEAD", "ref: refs/heads/main\n")
	mkdirs(t, root, "bare/refs")
	symlink(t, outside, root, "bare/objects")
	write(t, root, "bare/config", decoyConfig)
	gitDir(t, outside, "r/.git", safeConfig)
	symlink(t, filepath.Join(outside, "r"), root, "link")

	v, err := openView(root, "")
	require.NoError(t, err)
	defer v.close()
	sc, err := scanGit(v, nil, 0, nil, nil)
	require.NoError(t, err)
	require.NoError(t, sc.err)
	var found []string
	for _, e := range sc.entries {
		found = append(found, e.rel)
	}
	for _, want := range []string{
		".git/config", ".git/hooks", ".git/hooks/pre-commit", deep + "/config", deep + "/hooks", deep + "/hooks/post-checkout",
		"sub/.git", "elsewhere/config", ".git/modules/m/config", ".git/objects/ab/.git/config",
		"decoy/.git/config", "decoy/objects/n/.git/config", "bare/config",
	} {
		assert.Contains(t, found, want)
	}
	for _, want := range []string{".git", "decoy", "bare", "elsewhere", ".git/modules/m"} {
		assert.True(t, sc.dirs[want], "%s is a git directory", want)
	}
	assert.Equal(t, "elsewhere", sc.pointers["sub/.git"])
	for _, f := range found {
		assert.False(t, strings.HasPrefix(f, "link/") || strings.HasPrefix(f, "bare/objects/"), "followed a symlink: %s", f)
	}
}

// TestGitAuditDecoys: being, or looking like, a git directory hides nothing
// from the audit — a repository under a decoy git directory (at the top
// too, over nested repositories and .git/modules), a git directory whose
// objects is a symlink (git accepts it), a repository in git's own data
// (a symlink the command left can lead a later git there) — in the
// workspace and in a transaction's upper layer.
func TestGitAuditDecoys(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, ws string) // before the start, in the workspace
		plant func(t *testing.T, at string) // by the command
		want  []string                      // neutralized, rel to the workspace
	}{
		{
			name: "a decoy git directory over a repository's .git",
			plant: func(t *testing.T, at string) {
				gitDir(t, at, "sub/.git", fsmonitor)
				write(t, at, "sub/HEAD", "ref\n")
				mkdirs(t, at, "sub/objects", "sub/refs")
			},
			want: []string{"sub/.git/config"},
		},
		{
			name: "a decoy at the top over nested repositories and modules",
			plant: func(t *testing.T, at string) {
				write(t, at, "HEAD", "ref: refs/heads/main\n")
				mkdirs(t, at, "objects", "refs")
				gitDir(t, at, "n/.git", fsmonitor)
				gitDir(t, at, ".git", safeConfig)
				gitDir(t, at, ".git/modules/m", fsmonitor)
				write(t, at, ".git/modules/m/hooks/post-checkout", "#!/bin/sh\n")
			},
			want: []string{".git/modules/m/config", ".git/modules/m/hooks/post-checkout", "n/.git/config"},
		},
		{
			name: "a git directory whose objects is a symlink",
			plant: func(t *testing.T, at string) {
				write(t, at, "sub/HEAD", "ref: refs/heads/main\n")
				mkdirs(t, at, "sub/refs")
				symlink(t, "/usr", at, "sub/objects")
				write(t, at, "sub/config", decoyConfig)
			},
			want: []string{"sub/config"},
		},
		{
			name:  "a repository in git's data, reached by a symlink",
			setup: func(t *testing.T, ws string) { gitDir(t, ws, ".git", safeConfig) },
			plant: func(t *testing.T, at string) {
				gitDir(t, at, ".git/objects/ab/.git", fsmonitor)
				symlink(t, ".git/objects/ab", at, "src")
			},
			want: []string{".git/objects/ab/.git/config"},
		},
		{
			name:  "a git directory that no longer looks like one",
			setup: func(t *testing.T, ws string) { gitDir(t, ws, "b", safeConfig) },
			plant: func(t *testing.T, at string) {
				gitDir(t, at, "b", fsmonitor) // (a copy, in a transaction)
				require.NoError(t, os.Remove(filepath.Join(at, "b/HEAD")))
			},
			want: []string{"b/config"},
		},
		{
			name: "a .git file naming a directory that does not look like a git directory",
			plant: func(t *testing.T, at string) {
				write(t, at, "sub/.git", "gitdir: ../x\n")
				write(t, at, "x/config", fsmonitor)
			},
			want: []string{"x/config"},
		},
		{
			name: "a .git file whose way out of the root a symlink hides",
			plant: func(t *testing.T, at string) {
				o := tempDir(t)
				mkdirs(t, o, "deep/x")
				gitDir(t, o, "evil", fsmonitor)
				symlink(t, filepath.Join(o, "deep/x"), at, "sub/link")
				gitDir(t, at, "evil", safeConfig) // what "sub/link/../../evil" reads as text
				write(t, at, "sub/.git", "gitdir: link/../../evil\n")
			},
			want: []string{"sub/.git"},
		},
		{
			name: "a .git file naming a directory outside the root",
			plant: func(t *testing.T, at string) {
				write(t, at, "sub/.git", "gitdir: /var/tmp\n")
			},
			want: []string{"sub/.git"},
		},
		{
			name: "a .git link to a git directory with a hook",
			plant: func(t *testing.T, at string) {
				gitDir(t, at, "y", safeConfig)
				write(t, at, "y/hooks/pre-commit", "#!/bin/sh\n")
				symlink(t, "../y", at, "sub/.git")
			},
			want: []string{"y/hooks/pre-commit"},
		},
	}
	for _, fl := range flavors {
		for _, c := range cases {
			t.Run(fl+"/"+c.name, func(t *testing.T) {
				e := newFlavor(t, fl)
				if c.setup != nil {
					c.setup(t, e.ws)
				}
				e.start()
				c.plant(t, e.at)
				var want []string
				for _, w := range c.want {
					want = append(want, "git-control "+w)
				}
				assert.Equal(t, want, e.finish(false))
				for _, w := range c.want {
					e.requireGone(w)
				}
			})
		}
	}
}

// TestGitAuditOverMergedView: in a transaction the upper layer holds only
// what the command changed; a git directory is told by what git will see
// once committed — the workspace's entries showing through — so a hook
// added to a bare repository of the workspace, or a config added to a
// directory that the command turns into a git directory, are judged. A
// removal (a whiteout) is no control entry: nothing to undo, nothing to
// report.
func TestGitAuditOverMergedView(t *testing.T) {
	e := newEnv(t, true)
	gitDir(t, e.ws, "repo.git", safeConfig)
	write(t, e.ws, "m/HEAD", "ref: refs/heads/main\n")
	mkdirs(t, e.ws, "m/refs")
	gitDir(t, e.ws, "sub/.git", safeConfig)
	write(t, e.ws, "sub/.git/hooks/pre-commit", "#!/bin/sh\n")
	write(t, e.ws, ".vscode/tasks.json", "{}")
	e.start()
	write(t, e.at, "repo.git/hooks/post-update", "#!/bin/sh\n")
	mkdirs(t, e.at, "m/objects")
	write(t, e.at, "m/config", fsmonitor)
	whiteouts := os.Geteuid() == 0
	if whiteouts {
		mkdirs(t, e.at, "sub/.git/hooks")
		require.NoError(t, syscall.Mknod(filepath.Join(e.at, "sub/.git/hooks/pre-commit"), syscall.S_IFCHR, 0))
		mkdirs(t, e.at, ".vscode")
		require.NoError(t, syscall.Mknod(filepath.Join(e.at, ".vscode/tasks.json"), syscall.S_IFCHR, 0))
	}
	assert.Equal(t, []string{"git-control m/config", "git-control repo.git/hooks/post-update"}, e.finish(false))
	e.requireGone("m/config")
	e.requireGone("repo.git/hooks/post-update")
	if whiteouts {
		assert.FileExists(t, filepath.Join(e.at, "sub/.git/hooks/pre-commit"), "the removal stays")
	}
}

// execConfig is a repository config that makes git run files of its work
// tree: a hooks directory, an included config, a filter driver (which
// attributes select), an alias.
const execConfig = safeConfig + `[core]
	hooksPath = .githooks
[include]
	path = ../.gitconfig.project
[filter "x"]
	clean = ./tools/clean %f
[alias]
	t = "!cd src && ../scripts/t.sh --fast"
`

// TestGitAuditExecPaths: what the repository's own config makes git run in
// its work tree is protected like .git/hooks — a new or changed hook in its
// core.hooksPath (husky, .githooks), an included config that is no longer
// safe, a program its filter driver or an alias runs — while the rest of
// the work tree, a sample hook and a safe change of an included config stay;
// a new work tree for such a repository (a .git file naming it) would place
// those where nothing protects them, and goes aside.
func TestGitAuditExecPaths(t *testing.T) {
	cases := []struct {
		name   string
		config string
		plant  func(t *testing.T, at string)
		want   []string
	}{
		{"a new hook in core.hooksPath", execConfig, func(t *testing.T, at string) {
			write(t, at, ".githooks/post-checkout", "#!/bin/sh\n")
		}, []string{".githooks/post-checkout"}},
		{"a changed hook in core.hooksPath", execConfig, func(t *testing.T, at string) {
			write(t, at, ".githooks/pre-commit", "#!/bin/sh\ntouch /tmp/pwned\n")
		}, []string{".githooks/pre-commit"}},
		{"core.hooksPath replaced by a link", execConfig, func(t *testing.T, at string) {
			require.NoError(t, os.RemoveAll(filepath.Join(at, ".githooks")))
			symlink(t, "src", at, ".githooks")
		}, []string{".githooks"}},
		{"an included config made unsafe", execConfig, func(t *testing.T, at string) {
			write(t, at, ".gitconfig.project", fsmonitor)
		}, []string{".gitconfig.project"}},
		{"the filter driver's program", execConfig, func(t *testing.T, at string) {
			write(t, at, "tools/clean", "#!/bin/sh\ntouch /tmp/pwned\n")
		}, []string{"tools/clean"}},
		{"the alias's script", execConfig, func(t *testing.T, at string) {
			write(t, at, "scripts/t.sh", "#!/bin/sh\ntouch /tmp/pwned\n")
		}, []string{"scripts/t.sh"}},
		{"a new work tree for the repository", execConfig, func(t *testing.T, at string) {
			write(t, at, "wt/.git", "gitdir: ../.git\n")
		}, []string{"wt/.git"}},
		{"ordinary work", execConfig, func(t *testing.T, at string) {
			write(t, at, ".githooks/pre-commit", "#!/bin/sh\ntrue\n") // rewritten as it was
			write(t, at, ".githooks/pre-push.sample", "#!/bin/sh\n")
			write(t, at, ".gitconfig.project", "[user]\n\tname = y\n")
			write(t, at, "src/a.go", "package b\n")
			write(t, at, "tools/other", "x\n")
			write(t, at, "src/new.go", "package a\n")
		}, nil},
		{"the work tree as the hooks directory: its hooks only", safeConfig + "[core]\n\thooksPath = .\n", func(t *testing.T, at string) {
			write(t, at, "pre-commit", "#!/bin/sh\n")
			write(t, at, "README", "x\n")
		}, []string{"pre-commit"}},
	}
	for _, fl := range flavors {
		for _, c := range cases {
			t.Run(fl+"/"+c.name, func(t *testing.T) {
				e := newFlavor(t, fl)
				gitDir(t, e.ws, ".git", c.config)
				write(t, e.ws, ".githooks/pre-commit", "#!/bin/sh\ntrue\n")
				write(t, e.ws, ".gitconfig.project", "[user]\n\tname = x\n")
				write(t, e.ws, "tools/clean", "#!/bin/sh\ncat\n")
				write(t, e.ws, "scripts/t.sh", "#!/bin/sh\ntrue\n")
				write(t, e.ws, "src/a.go", "package a\n")
				e.start()
				c.plant(t, e.at)
				var want []string
				for _, w := range c.want {
					want = append(want, "git-control "+w)
				}
				// (The kernel held .git/config: it is the user's.)
				assert.Equal(t, want, e.finish(true))
				for _, w := range c.want {
					e.requireGone(w)
				}
			})
		}
	}
}

// TestGitAuditKeepsOrdinaryGit: what git itself makes in a command — a new
// repository, commits, branches, a worktree, a submodule, a clone — is
// neither set aside nor reported.
func TestGitAuditKeepsOrdinaryGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	e := newEnv(t, false)
	sh := func(script string) {
		t.Helper()
		cmd := exec.Command("bash", "-c", "set -e\n"+script)
		cmd.Dir = e.ws
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	sh(`git init -q top && git -C top commit -q --allow-empty -m start`)
	e.start()
	sh(`cd top; echo a > a; git add a; git commit -q -m a; git branch b; git worktree add -q ../wt b
		git init -q ../lib; git -C ../lib commit -q --allow-empty -m l
		git init -q nested; cd nested; git commit -q --allow-empty -m n
		git -c protocol.file.allow=always submodule add -q ../../lib lib; git commit -q -m sub
		cd ..; git clone -q . ../clone; git -C ../wt commit -q --allow-empty -m w`)
	assert.Empty(t, e.finish(false))
	var quarantined []string
	_ = filepath.Walk(e.ws, func(p string, _ os.FileInfo, _ error) error {
		if strings.Contains(p, ".dsh-quarantined") {
			quarantined = append(quarantined, p)
		}
		return nil
	})
	assert.Empty(t, quarantined)
}

// TestGitAuditUnreadable: a directory the audit cannot read — made so by
// the command, which ran as this user — is set aside whole and reported,
// never skipped (git reaches what is in it by name): a directory over a
// repository, a hooks directory, one listable but not searchable, the
// audited root itself (its mode is given back, then it is audited); an
// entry in a directory without write permission is set aside all the same.
// A directory that is someone else's and that this user cannot search, the
// command could not have entered: it stays, unreported.
func TestGitAuditUnreadable(t *testing.T) {
	if !asUser(t, func(dir string, uid, gid int) {
		require.NoError(t, os.Mkdir(filepath.Join(dir, "theirs"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "theirs/x"), nil, 0o600))
	}) {
		return
	}
	chmod := func(t *testing.T, dir, rel string, mode os.FileMode) {
		require.NoError(t, os.Chmod(filepath.Join(dir, rel), mode))
	}
	cases := []struct {
		name  string
		plant func(t *testing.T, at string)
		want  []string
		gone  []string
	}{
		{"a directory over a repository", func(t *testing.T, at string) {
			gitDir(t, at, "d/sub/.git", fsmonitor)
			chmod(t, at, "d", 0o311)
		}, []string{"git-control d, unreadable"}, []string{"d"}},
		{"a hooks directory", func(t *testing.T, at string) {
			write(t, at, "r/.git/hooks/pre-commit", "#!/bin/sh\n")
			chmod(t, at, "r/.git/hooks", 0o311)
		}, []string{"git-control r/.git/hooks, unreadable"}, []string{"r/.git/hooks"}},
		{"a directory without search permission", func(t *testing.T, at string) {
			gitDir(t, at, "d/sub/.git", fsmonitor)
			chmod(t, at, "d", 0o644)
		}, []string{"git-control d, unreadable"}, []string{"d"}},
		{"a protected directory", func(t *testing.T, at string) {
			write(t, at, ".vscode/tasks.json", "{}")
			chmod(t, at, ".vscode", 0o311)
		}, []string{"protected-path .vscode, unreadable"}, []string{".vscode"}},
		{"a directory without write permission", func(t *testing.T, at string) {
			write(t, at, "r/.git/config", fsmonitor)
			chmod(t, at, "r/.git", 0o555)
		}, []string{"git-control r/.git/config"}, []string{"r/.git/config"}},
	}
	for _, fl := range flavors {
		over := fl == "transaction"
		for _, c := range cases {
			t.Run(fl+"/"+c.name, func(t *testing.T) {
				e := newFlavor(t, fl)
				gitDir(t, e.ws, "r/.git", safeConfig)
				write(t, e.ws, ".vscode/settings.json", "{}")
				if over {
					// (What the command changes in a directory of the
					// workspace lands in a copy of it.)
					gitDir(t, e.at, "r/.git", safeConfig)
					write(t, e.at, ".vscode/settings.json", "{}")
				}
				e.start()
				c.plant(t, e.at)
				assert.Equal(t, c.want, e.finish(false))
				for _, g := range c.gone {
					e.requireGone(g)
				}
				if fi, err := os.Stat(filepath.Join(e.at, "r/.git")); err == nil && c.name == "a directory without write permission" {
					assert.Equal(t, os.FileMode(0o555), fi.Mode().Perm(), "the mode is given back")
				}
			})
		}
	}
	t.Run("the audited root", func(t *testing.T) {
		e := newEnv(t, false)
		e.start()
		gitDir(t, e.ws, "sub/.git", fsmonitor)
		require.NoError(t, os.Chmod(e.ws, 0o311))
		assert.Equal(t, []string{"git-control ., unreadable", "git-control sub/.git/config"}, e.finish(false))
		e.requireGone("sub/.git/config")
	})
	t.Run("set aside by an earlier run", func(t *testing.T) {
		e := newEnv(t, false)
		gitDir(t, e.ws, "d/sub/.git", fsmonitor)
		require.NoError(t, os.Chmod(filepath.Join(e.ws, "d"), 0o311))
		e.start()
		assert.Equal(t, []string{"git-control d, unreadable"}, e.finish(false))
		e.start()
		assert.Empty(t, e.finish(false), "the next command leaves it be")
		assert.DirExists(t, filepath.Join(e.ws, "d.dsh-quarantined"))
	})
	t.Run("someone else's", func(t *testing.T) {
		dir := userDir()
		if dir == "" {
			t.Skip("run as root: the other user's directory is made then")
		}
		e := &env{t: t, ws: dir, at: dir}
		e.start()
		write(t, e.ws, "mine.txt", "x")
		assert.Empty(t, e.finish(false))
		assert.DirExists(t, filepath.Join(dir, "theirs"))
	})
}

// TestGitAuditSubmoduleWorktree: a submodule's git directory, its .git file
// and its core.worktree are kept where the work tree is the directory whose
// .git file names the git directory; a core.worktree anywhere else is not.
func TestGitAuditSubmoduleWorktree(t *testing.T) {
	e := newEnv(t, false)
	gitDir(t, e.ws, "top/.git", safeConfig)
	e.start()
	mkdirs(t, e.ws, "top/lib")
	write(t, e.ws, "top/lib/.git", "gitdir: ../.git/modules/lib\n")
	gitDir(t, e.ws, "top/.git/modules/lib", safeConfig+"\tworktree = ../../../lib\n")
	write(t, e.ws, "top/x/.git", "gitdir: ../.git/modules/x\n")
	gitDir(t, e.ws, "top/.git/modules/x", safeConfig+"\tworktree = /home\n")
	gitDir(t, e.ws, "top/.git/modules/y", safeConfig+"\tworktree = ../../..\n") // (top: no .git file naming it)
	assert.Equal(t, []string{"git-control top/.git/modules/x/config", "git-control top/.git/modules/y/config"}, e.finish(false))
}

// TestViewResolve: a path is walked as the kernel walks it — a ".." after a
// symlink goes up from where the symlink led — and, for a pointer, through
// directories only; never out of the root.
func TestViewResolve(t *testing.T) {
	root := tempDir(t)
	outside := tempDir(t)
	mkdirs(t, root, "a/b", "y", ".git/worktrees/wt")
	mkdirs(t, outside, "deep/x")
	symlink(t, filepath.Join(outside, "deep/x"), root, "out")
	symlink(t, "a/b", root, "in")
	write(t, root, "f", "")
	v, err := openView(root, "")
	require.NoError(t, err)
	defer v.close()
	for _, c := range []struct {
		from, target string
		follow       bool
		want         string // "" : refused
	}{
		{"a", "../y", false, "y"},
		{".git/worktrees/wt", "../..", false, ".git"},
		{"sub", root + "/.git/worktrees/wt", false, ".git/worktrees/wt"},
		{".", "out/../y", false, ""},  // through a symlink
		{".", "out/../y", true, ""},   // which leads out of the root
		{".", "in/../y", true, "a/y"}, // the kernel's ".."
		{".", "in/missing/z", true, "a/b/missing/z"},
		{".", "in/missing", false, ""},
		{".", "f/x", true, ""}, // a file on the way
		{".", "..", true, ""},
		{".", "/etc", true, ""},
		{".", root + "x/y", true, ""}, // a sibling sharing the prefix
	} {
		got, ok := v.resolve(c.from, c.target, c.follow)
		if c.want == "" {
			assert.False(t, ok, "%+v gave %q", c, got)
		} else {
			assert.Equal(t, c.want, got, "%+v", c)
		}
	}
}
