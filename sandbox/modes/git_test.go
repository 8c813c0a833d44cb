package modes

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGitConfigSafe(t *testing.T) {
	initCfg := "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
	clone := initCfg + "[remote \"origin\"]\n\turl = /work/src\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"master\"]\n\tremote = origin\n\tmerge = refs/heads/master\n"
	for _, c := range []string{"", initCfg, clone, "# c\n; c\n[user]\n\tname = x\n\temail = y # z\n", "[core] # c\n\tbare\n"} {
		assert.Truef(t, GitConfigSafe([]byte(c)), "GitConfigSafe(%q) = false, want true", c)
	}
	for _, c := range []string{
		"[core]\n\thooksPath = /tmp/x\n",
		"[core]\n\tfsmonitor = touch /tmp/p\n",
		"[Core]\n\tFSMonitor = x\n",
		"[core]\n\tsshCommand = x\n", "[core]\n\tpager = x\n", "[core]\n\teditor = x\n", "[core]\n\tworktree = /home\n",
		"[include]\n\tpath = ../evil\n", "[includeIf \"gitdir:/\"]\n\tpath = x\n",
		"[alias]\n\tst = !touch /tmp/p\n", "[filter \"x\"]\n\tclean = x\n", "[diff \"x\"]\n\ttextconv = x\n",
		"[remote \"o\"]\n\tuploadpack = x\n", "[credential]\n\thelper = x\n", "[gpg]\n\tprogram = x\n",
		"[core.x]\n\tbare = false\n",                          // old-style subsection
		"[core]\n\tbare = false \\\n\nfsmonitor = x\n",        // continuation
		"bare = false\n",                                      // no section
		"[core]\n\t\"fsmonitor\" = x\n",                       // quoted key
		"[remote \"o\\\"\"]\n\turl = x\n",                     // escape in a subsection
		"[core]\n\tbare = false\n\x00[core]\n\tfsmonitor=x\n", // NUL
		"[core\n\tbare = false\n",
		"[core]\n" + strings.Repeat("#", MaxGitConfig) + "\n",
	} {
		assert.Falsef(t, GitConfigSafe([]byte(c)), "GitConfigSafe(%q) = true, want false", c)
	}
}

func TestGitHookInert(t *testing.T) {
	assert.True(t, GitHookInert("pre-commit.sample"), `GitHookInert("pre-commit.sample")`)
	assert.False(t, GitHookInert("pre-commit"), `GitHookInert("pre-commit")`)
	assert.False(t, GitHookInert("sample"), `GitHookInert("sample")`)
}

// TestGitConfigSafeWith: what `git submodule add` writes — submodule.*.url
// and .active in the superproject, core.worktree in the submodule's git
// directory — is safe, core.worktree only where the caller accepts it.
func TestGitConfigSafeWith(t *testing.T) {
	super := "[core]\n\tbare = false\n[submodule \"lib\"]\n\turl = /work/lib\n\tactive = true\n"
	sub := "[core]\n\tbare = false\n\tworktree = ../../../lib\n"
	within := func(p string) bool { return p == "../../../lib" }
	for _, c := range []struct {
		config   string
		worktree func(string) bool
		want     bool
	}{
		{super, nil, true},
		{sub, within, true},
		{sub, nil, false},
		{"[core]\n\tworktree = /home\n", within, false},
		{"[core]\n\tworktree = \"../../../lib\"\n", within, false},
		{"[core]\n\tworktree = ../../../lib # x\n", within, false},
		{"[core]\n\tworktree\n", func(string) bool { return true }, false},
		{"[submodule \"lib\"]\n\tupdate = !touch /tmp/p\n", within, false},
	} {
		assert.Equalf(t, c.want, GitConfigSafeWith([]byte(c.config), c.worktree), "GitConfigSafeWith(%q)", c.config)
	}
}
