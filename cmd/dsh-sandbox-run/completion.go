package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// subcommands are the words dsh-sandbox-run takes first instead of options.
var subcommands = []string{"policy", "trust", "commit", "discard", "diff", "changes", "caches", "completion"}

// flagValues says what each option's value is, for completion: "dir",
// "file", or the words it takes; an option not listed takes a value to
// type (or none, when boolean).
var flagValues = map[string][]string{
	"mode":        {"read-only", "workspace-write", "danger-full-access"},
	"workspace":   {"dir"},
	"allow-write": {"dir"},
	"cache-dir":   {"dir"},
	"transaction": {"dir"},
	"protect":     {"file"},
	"deny-read":   {"file"},
	"allow-read":  {"file"},
	"report":      {"file"},
	"config":      {"file"},
}

// completionCommand runs `completion bash|zsh|fish`: print a completion
// script for that shell, made from the option set.
func completionCommand(argv []string, stdout, stderr io.Writer) int {
	fail := failer(stderr, name, exitSetup)
	if len(argv) != 1 {
		return fail("usage error: %s completion bash|zsh|fish", name)
	}
	o, err := parse([]string{"--help"}, nil)
	if err != nil {
		return fail("%v", err)
	}
	switch argv[0] {
	case "bash":
		fmt.Fprint(stdout, bashCompletion(o.flags))
	case "zsh":
		// The bash function, through zsh's bash completion layer (which
		// needs compinit's compdef).
		fmt.Fprint(stdout, "#compdef dsh-sandbox-run\n(( $+functions[compdef] )) || { autoload -U +X compinit && compinit }\n"+
			"autoload -U +X bashcompinit && bashcompinit\n"+bashCompletion(o.flags))
	case "fish":
		fmt.Fprint(stdout, fishCompletion(o.flags))
	default:
		return fail("usage error: completion: %q is not one of bash, zsh, fish", argv[0])
	}
	return 0
}

// takesValue reports whether f needs a value.
func takesValue(f *pflag.Flag) bool { return f.Value.Type() != "bool" }

func bashCompletion(fs *pflag.FlagSet) string {
	var names, valued []string
	cases := map[string][]string{}
	fs.VisitAll(func(f *pflag.Flag) {
		names = append(names, "--"+f.Name)
		if f.Shorthand != "" {
			names = append(names, "-"+f.Shorthand)
		}
		if !takesValue(f) {
			return
		}
		switch v := flagValues[f.Name]; {
		case slices.Equal(v, []string{"dir"}):
			cases["dir"] = append(cases["dir"], "--"+f.Name)
		case slices.Equal(v, []string{"file"}):
			cases["file"] = append(cases["file"], "--"+f.Name)
		case len(v) > 0:
			cases[strings.Join(v, " ")] = append(cases[strings.Join(v, " ")], "--"+f.Name)
		default:
			valued = append(valued, "--"+f.Name)
		}
	})
	var b strings.Builder
	b.WriteString(`# bash completion for dsh-sandbox-run (dsh-sandbox-run completion bash)
_dsh_sandbox_run() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} i
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ ${COMP_WORDS[i]} == -- ]]; then
            if ((i == COMP_CWORD - 1)); then COMPREPLY=($(compgen -c -- "$cur")); else COMPREPLY=($(compgen -f -- "$cur")); fi
            return
        fi
    done
    case $prev in
`)
	keys := make([]string, 0, len(cases))
	for k := range cases {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		action := fmt.Sprintf(`COMPREPLY=($(compgen -W %q -- "$cur"))`, k)
		switch k {
		case "dir":
			action = `COMPREPLY=($(compgen -d -- "$cur"))`
		case "file":
			action = `COMPREPLY=($(compgen -f -- "$cur"))`
		}
		fmt.Fprintf(&b, "        %s) %s; return ;;\n", strings.Join(cases[k], "|"), action)
	}
	if len(valued) > 0 {
		fmt.Fprintf(&b, "        %s) return ;;\n", strings.Join(valued, "|"))
	}
	fmt.Fprintf(&b, `    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W %q -- "$cur"))
    elif ((COMP_CWORD == 1)); then
        COMPREPLY=($(compgen -W %q -- "$cur"))
    elif [[ ${COMP_WORDS[1]} == completion ]]; then
        COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur"))
    elif [[ ${COMP_WORDS[1]} =~ ^(commit|discard|diff|changes)$ ]]; then
        COMPREPLY=($(compgen -d -- "$cur"))
    fi
}
complete -F _dsh_sandbox_run dsh-sandbox-run
`, strings.Join(names, " ")+" --", strings.Join(subcommands, " "))
	return b.String()
}

func fishCompletion(fs *pflag.FlagSet) string {
	var b strings.Builder
	b.WriteString("# fish completion for dsh-sandbox-run (dsh-sandbox-run completion fish)\n")
	fmt.Fprintf(&b, "complete -c dsh-sandbox-run -n __fish_use_subcommand -f -a %q\n", strings.Join(subcommands, " "))
	b.WriteString("complete -c dsh-sandbox-run -n '__fish_seen_subcommand_from completion' -f -a 'bash zsh fish'\n")
	fs.VisitAll(func(f *pflag.Flag) {
		line := "complete -c dsh-sandbox-run -l " + f.Name
		if f.Shorthand != "" {
			line += " -s " + f.Shorthand
		}
		if takesValue(f) {
			switch v := flagValues[f.Name]; {
			case slices.Equal(v, []string{"dir"}):
				line += " -r -f -a '(__fish_complete_directories)'"
			case slices.Equal(v, []string{"file"}):
				line += " -r -F"
			case len(v) > 0:
				line += fmt.Sprintf(" -x -a %q", strings.Join(v, " "))
			default:
				line += " -x"
			}
		}
		_, usage := pflag.UnquoteUsage(f)
		line += " -d " + fishQuote(firstClause(usage))
		b.WriteString(line + "\n")
	})
	return b.String()
}

// firstClause is a flag's help up to its first "(" or ";", for a short
// description.
func firstClause(s string) string {
	if i := strings.IndexAny(s, "(;"); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func fishQuote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}
