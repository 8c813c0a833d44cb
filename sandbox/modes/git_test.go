package modes

import (
	"strings"
	"testing"
)

func TestGitConfigSafe(t *testing.T) {
	initCfg := "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
	clone := initCfg + "[remote \"origin\"]\n\turl = /work/src\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"master\"]\n\tremote = origin\n\tmerge = refs/heads/master\n"
	for _, c := range []string{"", initCfg, clone, "# c\n; c\n[user]\n\tname = x\n\temail = y # z\n", "[core] # c\n\tbare\n"} {
		if !GitConfigSafe([]byte(c)) {
			t.Errorf("GitConfigSafe(%q) = false, want true", c)
		}
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
		if GitConfigSafe([]byte(c)) {
			t.Errorf("GitConfigSafe(%q) = true, want false", c)
		}
	}
}

func TestGitHookInert(t *testing.T) {
	if !GitHookInert("pre-commit.sample") || GitHookInert("pre-commit") || GitHookInert("sample") {
		t.Error("GitHookInert")
	}
}
