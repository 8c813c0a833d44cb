package audit

import (
	"bytes"
	"path"
	"strings"
)

// configEntry is one variable of a git config file.
type configEntry struct {
	section, sub, key string // section and key in lower case; sub as written ("" for none)
	value             string
	hasValue          bool // false: the key alone, a boolean true
}

// name is the entry's "section.key", with "*" for any subsection
// ("filter.*.clean").
func (e configEntry) name() string {
	if e.sub != "" {
		return e.section + ".*." + e.key
	}
	return e.section + "." + e.key
}

// parseGitConfig reads b as git's config parser does (config.c): new and
// old style section headers, variables on the header's line, quoted values,
// escapes, continuation lines, comments. It returns the entries up to the
// first syntax error (where git refuses the whole file). It serves to find
// what a repository's own config makes git run, so reading more than git
// would is harmless; modes.GitConfigSafe, not this, judges what a command
// wrote.
func parseGitConfig(b []byte) []configEntry {
	p := &configParser{b: bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))}
	var out []configEntry
	section, sub, comment := "", "", false
	for {
		c, eof := p.next()
		switch {
		case c == '\n':
			if eof {
				return out
			}
			comment = false
			continue
		case comment || isConfigSpace(c):
			continue
		case c == '#' || c == ';':
			comment = true
			continue
		case c == '[':
			var ok bool
			if section, sub, ok = p.header(); !ok {
				return out
			}
			continue
		case !isAlpha(c) || section == "":
			return out
		}
		e, ok := p.variable(c)
		if !ok {
			return out
		}
		e.section, e.sub = section, sub
		out = append(out, e)
	}
}

type configParser struct {
	b []byte
	i int
}

// next returns the next character, "\r\n" as '\n', and '\n' with eof at
// the end.
func (p *configParser) next() (c byte, eof bool) {
	if p.i >= len(p.b) {
		return '\n', true
	}
	c = p.b[p.i]
	p.i++
	if c == '\r' && p.i < len(p.b) && p.b[p.i] == '\n' {
		p.i++
		c = '\n'
	}
	return c, false
}

// header reads a section header after its '[': "[section]",
// "[section "sub"]" or the old "[section.sub]".
func (p *configParser) header() (section, sub string, ok bool) {
	var name []byte
	for {
		c, eof := p.next()
		switch {
		case eof:
			return "", "", false
		case c == ']':
			s, sub, _ := strings.Cut(string(name), ".")
			return s, sub, true
		case isConfigSpace(c):
			sub, ok := p.subsection()
			return string(name), sub, ok
		case !isKeyChar(c) && c != '.':
			return "", "", false
		}
		name = append(name, lower(c))
	}
}

// subsection reads ` "sub"]` of a header.
func (p *configParser) subsection() (string, bool) {
	c, _ := p.next()
	for isConfigSpace(c) {
		c, _ = p.next()
	}
	if c != '"' {
		return "", false
	}
	var sub []byte
	for {
		c, _ = p.next()
		if c == '\n' {
			return "", false
		}
		if c == '"' {
			break
		}
		if c == '\\' {
			if c, _ = p.next(); c == '\n' {
				return "", false
			}
		}
		sub = append(sub, c)
	}
	if c, _ = p.next(); c != ']' {
		return "", false
	}
	return string(sub), true
}

// variable reads a variable whose name starts with c.
func (p *configParser) variable(c byte) (configEntry, bool) {
	name := []byte{lower(c)}
	for {
		var eof bool
		if c, eof = p.next(); eof || !isKeyChar(c) {
			break
		}
		name = append(name, lower(c))
	}
	for c == ' ' || c == '\t' {
		c, _ = p.next()
	}
	e := configEntry{key: string(name)}
	if c == '\n' {
		return e, true
	}
	if c != '=' {
		return e, false
	}
	v, ok := p.value()
	e.value, e.hasValue = v, true
	return e, ok
}

// value reads a value after its '=' (config.c parse_value).
func (p *configParser) value() (string, bool) {
	var v []byte
	quote, comment, space := false, false, 0
	for {
		c, _ := p.next()
		switch {
		case c == '\n':
			return string(v), !quote
		case comment:
			continue
		case isConfigSpace(c) && !quote:
			if len(v) > 0 {
				space++
			}
			continue
		case !quote && (c == ';' || c == '#'):
			comment = true
			continue
		}
		for ; space > 0; space-- {
			v = append(v, ' ')
		}
		switch c {
		case '\\':
			c, _ = p.next()
			switch c {
			case '\n':
				continue
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
			default:
				return "", false
			}
		case '"':
			quote = !quote
			continue
		}
		v = append(v, c)
	}
}

func isConfigSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r' }
func isAlpha(c byte) bool       { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isKeyChar(c byte) bool     { return isAlpha(c) || c >= '0' && c <= '9' || c == '-' }
func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// commandKey reports whether git runs the value of a variable as a command
// (a shell command line, or a program): the keys of git-config(1) that take
// one, so that a program they name by a path in the work tree is protected.
func commandKey(e configEntry) bool {
	switch e.name() {
	case "core.fsmonitor", "core.sshcommand", "core.pager", "core.editor", "core.askpass", "core.gitproxy",
		"sequence.editor", "diff.external", "diff.*.textconv", "diff.*.command",
		"filter.*.clean", "filter.*.smudge", "filter.*.process", "merge.*.driver",
		"credential.helper", "credential.*.helper", "gpg.program", "gpg.*.program", "gpg.*.defaultkeycommand",
		"remote.*.uploadpack", "remote.*.receivepack", "submodule.*.update",
		"difftool.*.cmd", "difftool.*.path", "mergetool.*.cmd", "mergetool.*.path",
		"browser.*.cmd", "browser.*.path", "man.*.cmd", "man.*.path", "guitool.*.cmd",
		"trailer.*.cmd", "trailer.*.command", "sendemail.smtpserver", "sendemail.sendmailcmd",
		"sendemail.tocmd", "sendemail.cccmd", "interactive.difffilter", "uploadpack.packobjectshook":
		return true
	}
	return e.sub == "" && (e.section == "alias" || e.section == "pager")
}

// interpreters run the script their first operand names.
var interpreters = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "fish": true,
	"python": true, "python3": true, "perl": true, "ruby": true, "node": true, "deno": true, "bun": true,
	"env": true, "exec": true, "command": true, "nice": true, "nohup": true, "time": true, "xargs": true,
}

// programs returns the programs a command line of a config runs by a path
// (one holding a '/'): the first word of each simple command (an alias's
// leading "!" removed, variable assignments skipped), or the script an
// interpreter it names runs. Other words — a directory to cd to, an
// argument — are not executed by git and stay writable.
func programs(cmd string) []string {
	var out []string
	cmd = strings.TrimPrefix(strings.TrimSpace(cmd), "!")
	for _, simple := range strings.FieldsFunc(cmd, func(r rune) bool { return strings.ContainsRune(";&|()`\n{}", r) }) {
		words := strings.Fields(strings.NewReplacer(`"`, "", "'", "").Replace(simple))
		for len(words) > 0 && strings.Contains(words[0], "=") && !strings.Contains(words[0], "/") {
			words = words[1:] // VAR=value
		}
		for len(words) > 0 {
			w := words[0]
			words = words[1:]
			if strings.Contains(w, "/") && !strings.ContainsAny(w, "$*?[") {
				out = append(out, w) // (an expansion names no path known here)
			}
			if !interpreters[path.Base(w)] {
				break
			}
			for len(words) > 0 && (strings.HasPrefix(words[0], "-") || strings.Contains(words[0], "=") && !strings.Contains(words[0], "/")) {
				words = words[1:] // an option, an assignment of env
			}
		}
	}
	return out
}

// gitHookNames are the hooks git runs (githooks(5)), by the name of a file
// in a hooks directory.
var gitHookNames = map[string]bool{
	"applypatch-msg": true, "pre-applypatch": true, "post-applypatch": true, "pre-commit": true,
	"pre-merge-commit": true, "prepare-commit-msg": true, "commit-msg": true, "post-commit": true,
	"pre-rebase": true, "post-checkout": true, "post-merge": true, "pre-push": true,
	"pre-receive": true, "update": true, "proc-receive": true, "post-receive": true,
	"post-update": true, "reference-transaction": true, "push-to-checkout": true,
	"pre-auto-gc": true, "post-rewrite": true, "sendemail-validate": true,
	"fsmonitor-watchman": true, "p4-changelist": true, "p4-prepare-changelist": true,
	"p4-post-changelist": true, "p4-pre-submit": true, "post-index-change": true,
}
