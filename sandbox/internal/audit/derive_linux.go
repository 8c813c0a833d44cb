//go:build linux

package audit

import (
	"path"
	"slices"
)

// maxConfig bounds what is read of a repository's own config (and of each
// file it includes) to find what it makes git run.
const maxConfig = 4 << 20

// maxIncludeDepth is git's own bound on nested includes (config.c).
const maxIncludeDepth = 10

// execPath is an entry outside a git directory that a repository's own
// config makes git run or read as config: what is protected like
// .git/hooks.
type execPath struct {
	rel  string
	kind protKind
}

// deriveExec returns what the config of each git directory sc found makes
// git run or read, by a path inside the root: a core.hooksPath directory,
// a file include.path or includeIf.*.path names (and what it includes in
// turn), a program a command key names (a filter, diff or merge driver
// that attributes select, a credential helper, an alias, the fsmonitor
// hook...). A relative hooksPath or program is looked up in every work tree
// of the repository (where git runs hooks and commands) and in its git
// directory (where a bare repository runs them); an include is relative to
// the file that names it.
func deriveExec(v *view, sc *gitScan) []execPath {
	trees := workTrees(sc)
	var out []execPath
	// add protects a path as named and as git reaches it.
	add := func(named, reached string, kind protKind) {
		for _, r := range []string{named, reached} {
			if r == "" || r == "." && kind != protHookNames {
				continue // outside; the root itself is no program nor config
			}
			if !slices.Contains(out, execPath{r, kind}) {
				out = append(out, execPath{r, kind})
			}
		}
	}
	dirs := make([]string, 0, len(sc.dirs))
	for g := range sc.dirs {
		dirs = append(dirs, g)
	}
	slices.Sort(dirs)
	for _, g := range dirs {
		var entries []configEntry
		for _, n := range []string{"config", "config.worktree"} {
			entries = append(entries, readConfig(v, path.Join(g, n), 0, add)...)
		}
		bases := append([]string{g}, trees[g]...)
		for _, e := range entries {
			if e.name() == "core.worktree" && e.hasValue {
				if r, ok := v.resolve(g, e.value, true); ok {
					bases = append(bases, r)
				}
			}
		}
		for _, e := range entries {
			switch {
			case e.name() == "core.hookspath" && e.hasValue:
				for _, b := range bases {
					named, reached := v.pathname(b, e.value)
					// A work tree, a git directory or the root as
					// the hooks directory: its hooks, not all it
					// holds.
					kind := protHooks
					for _, r := range []string{named, reached} {
						if r == "." || slices.Contains(bases, r) {
							kind = protHookNames
						}
					}
					add(named, reached, kind)
				}
			case commandKey(e):
				for _, p := range programs(e.value) {
					for _, b := range bases {
						if named, reached := v.pathname(b, p); reached == "" || !v.isDir(reached) {
							add(named, reached, protProgram)
						}
					}
				}
			}
		}
	}
	return out
}

// readConfig returns the entries of the config file rel and of the files
// it includes (each given to add as a protConfig), depth includes deep.
func readConfig(v *view, rel string, depth int, add func(named, reached string, kind protKind)) []configEntry {
	if depth > maxIncludeDepth {
		return nil
	}
	r, ok := v.follow(rel)
	if !ok {
		return nil
	}
	b, ok := v.read(r, maxConfig)
	if !ok {
		return nil
	}
	var out []configEntry
	for _, e := range parseGitConfig(b) {
		out = append(out, e)
		if (e.name() == "include.path" || e.section == "includeif" && e.sub != "" && e.key == "path") && e.hasValue {
			if named, reached := v.pathname(path.Dir(rel), e.value); named != "" || reached != "" {
				add(named, reached, protConfig)
				if reached != "" {
					out = append(out, readConfig(v, reached, depth+1, add)...)
				}
			}
		}
	}
	return out
}

// workTrees returns, for each git directory of sc, the work trees git uses
// it for: the parent of a directory named .git, the directory of each .git
// file or link naming it, and those of each git directory whose commondir
// names it (its config is theirs too).
func workTrees(sc *gitScan) map[string][]string {
	trees := map[string][]string{}
	for g := range sc.dirs {
		if path.Base(g) == ".git" {
			trees[g] = append(trees[g], path.Dir(g))
		}
	}
	for p, t := range sc.pointers {
		if t != "" && path.Base(p) == ".git" {
			trees[t] = append(trees[t], path.Dir(p))
		}
	}
	for p, t := range sc.pointers {
		if t != "" && path.Base(p) == "commondir" {
			trees[t] = append(trees[t], trees[path.Dir(p)]...)
		}
	}
	return trees
}
