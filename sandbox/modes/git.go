package modes

import (
	"bufio"
	"bytes"
	"strings"
)

// MaxGitConfig is the largest repository config GitConfigSafe accepts.
const MaxGitConfig = 64 << 10

// safeGitKeys are the repository config keys `git init`, `git clone` of a
// local repository, `git branch`, `git remote` and `git submodule add` write,
// none of which makes git execute or follow anything: "section.key" or
// "section.*.key" (any subsection). Everything else — core.hooksPath,
// core.fsmonitor, core.sshCommand, core.pager, core.editor, core.worktree
// (but see GitConfigSafeWith), include.*,
// includeIf.*, alias.*, filter.*, diff.*, merge.*, credential.*, gpg.*,
// remote.*.uploadpack, ... — is not.
var safeGitKeys = map[string]bool{
	"core.repositoryformatversion": true, "core.filemode": true, "core.bare": true,
	"core.logallrefupdates": true, "core.ignorecase": true, "core.precomposeunicode": true,
	"core.symlinks": true, "core.autocrlf": true, "core.eol": true, "core.safecrlf": true,
	"core.quotepath": true, "extensions.objectformat": true, "init.defaultbranch": true,
	"user.name": true, "user.email": true,
	"remote.*.url": true, "remote.*.pushurl": true, "remote.*.fetch": true, "remote.*.push": true,
	"remote.*.tagopt": true, "remote.*.mirror": true, "remote.*.prune": true,
	"branch.*.remote": true, "branch.*.merge": true, "branch.*.rebase": true, "branch.*.pushremote": true,
	"pull.rebase": true, "pull.ff": true,
	"submodule.*.url": true, "submodule.*.active": true,
}

// GitConfigSafe reports whether b is a git config file every line of which
// is blank, a comment, a section header or a "key = value" of a key in the
// allowlist. It is deliberately stricter than git's parser: a continuation
// line, an old-style "[section.sub]" header, a quoted key or anything it does
// not understand makes the whole file unsafe.
func GitConfigSafe(b []byte) bool { return GitConfigSafeWith(b, nil) }

// GitConfigSafeWith is GitConfigSafe that also accepts core.worktree — what
// `git submodule` writes in a submodule's git directory — when worktree
// accepts its value, a plain path (without a quote, an escape or a comment
// character, which the parser here does not read). A nil worktree accepts
// none.
func GitConfigSafeWith(b []byte, worktree func(path string) bool) bool {
	if len(b) > MaxGitConfig || bytes.IndexByte(b, 0) >= 0 {
		return false
	}
	section, sub := "", false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), MaxGitConfig+1)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			return false // a continuation: the next line belongs to this value
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 || strings.TrimSpace(line[end+1:]) != "" && !isComment(line[end+1:]) {
				return false
			}
			h := strings.TrimSpace(line[1:end])
			name, rest, hasSub := strings.Cut(h, " ")
			if !validGitName(name, false) {
				return false
			}
			section, sub = strings.ToLower(name), hasSub
			if hasSub {
				rest = strings.TrimSpace(rest)
				if len(rest) < 2 || rest[0] != '"' || rest[len(rest)-1] != '"' || strings.ContainsAny(rest[1:len(rest)-1], "\"\\") {
					return false
				}
			}
			continue
		}
		if section == "" {
			return false
		}
		key, value, _ := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !validGitName(key, true) {
			return false
		}
		full := section + "." + strings.ToLower(key)
		if sub {
			full = section + ".*." + strings.ToLower(key)
		}
		if full == "core.worktree" {
			value = strings.TrimSpace(value)
			if worktree == nil || value == "" || strings.ContainsAny(value, "\"#;\\") || !worktree(value) {
				return false
			}
			continue
		}
		if !safeGitKeys[full] {
			return false
		}
	}
	return sc.Err() == nil
}

func isComment(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && (s[0] == '#' || s[0] == ';')
}

// validGitName: letters, digits and '-' (and '.' in section names, which
// git reads as the old subsection syntax: refused), starting with a letter
// for keys.
func validGitName(s string, key bool) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case (r >= '0' && r <= '9' || r == '-') && (i > 0 || !key):
		default:
			return false
		}
	}
	return true
}

// GitHookInert reports whether a file of this name in a hooks directory is
// never run by git: the templates' "*.sample" files.
func GitHookInert(name string) bool { return strings.HasSuffix(name, ".sample") }
