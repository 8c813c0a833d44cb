package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestParseGitConfig: values as git reads them — quotes, escapes,
// continuations, comments, old and new style headers, a variable on a
// header's line, a key alone — up to the first syntax error.
func TestParseGitConfig(t *testing.T) {
	in := "\xef\xbb\xbf# c\n[core]\n\thooksPath = \"a b\" # c\n\tfsmonitor = x\\\n y ; c\n\tbare\n" +
		"[Filter \"X y\"] clean = a\\tb\\\"c\\\\\n[alias.Sub]\n\tst = \"!f\" ;x\r\n[include]path=p\n" +
		"[bad\n[core]\n\teditor = z\n"
	want := []configEntry{
		{section: "core", key: "hookspath", value: "a b", hasValue: true},
		{section: "core", key: "fsmonitor", value: "x y", hasValue: true},
		{section: "core", key: "bare"},
		{section: "filter", sub: "X y", key: "clean", value: "a\tb\"c\\", hasValue: true},
		{section: "alias", sub: "sub", key: "st", value: "!f", hasValue: true},
		{section: "include", key: "path", value: "p", hasValue: true},
	}
	assert.Equal(t, want, parseGitConfig([]byte(in)))
	assert.Equal(t, "filter.*.clean", want[3].name())
	for _, bad := range []string{"[core]\n\ta = \"x\n", "[core]\n\ta = \\q\n", "[core \"x]\n", "a = b\n", "[core]\n\t1a = b\n"} {
		assert.Empty(t, parseGitConfig([]byte(bad)), bad)
	}
}

// TestPrograms: the programs a command line runs by a path — the first word
// of each simple command, an interpreter's script — and not its other
// words.
func TestPrograms(t *testing.T) {
	for in, want := range map[string][]string{
		"./tools/clean %f":                      {"./tools/clean"},
		"!cd src && ../scripts/t.sh --fast":     {"../scripts/t.sh"},
		"sh -e ./x.sh arg/y":                    {"./x.sh"},
		"FOO=1 env BAR=2 python3 -u tools/a.py": {"tools/a.py"},
		"touch /tmp/pwned; false":               nil,
		"git-lfs filter-process":                nil,
		"'./a' x | \"./d\"":                     {"./a", "./d"},
		"$HOME/bin/x; ~/bin/y":                  {"~/bin/y"},
		"make -C ./src lint":                    nil,
		"/usr/bin/env node ./n.js":              {"/usr/bin/env", "./n.js"},
	} {
		assert.Equal(t, want, programs(in), in)
	}
}
