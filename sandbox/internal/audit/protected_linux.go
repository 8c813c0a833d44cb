//go:build linux

package audit

import (
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// maxProtectedEntries bounds the entries recorded under one protected path.
// A larger tree at the start (an IDE's caches) is left to the kernel layers
// and the supervisor's pre-denial: unaudited.
const maxProtectedEntries = 10000

// protKind is what a protected path is, which says what in it is inert and
// how a neutralized entry is reported.
type protKind int

const (
	protNamed     protKind = iota // a protected name or --protect path: nothing new or changed is inert
	protHooks                     // a core.hooksPath directory: like .git/hooks, a "*.sample" file is inert
	protHookNames                 // a core.hooksPath that is a work tree (or too large): only its hooks, by name
	protConfig                    // a file a config includes: inert when modes.GitConfigSafe
	protProgram                   // a program a config's command names
)

// protectedPath is one protected path of an audited root, by its path
// relative to the root, with the entries at and under it at the start.
type protectedPath struct {
	rel    string
	kind   protKind
	before map[string]stamp // nil: not audited (too many entries)
	// sums are the contents of its small regular files at the start, for
	// the paths a config makes git run (a rewrite with the same content
	// and mode is no change: a hook manager reinstalling its hooks).
	sums map[string][sha256.Size]byte
	// way are the stamps of the directories (or links) on the way from
	// the root to rel at the start.
	way map[string]stamp
}

// op is the op of the denial for an entry of pp.
func (pp *protectedPath) op() string {
	if pp.kind == protNamed {
		return "protected-path"
	}
	return "git-control"
}

// covers reports whether the entry rel (at or under pp) is judged: all of
// them, but for a hooks directory judged by names, only its hooks.
func (pp *protectedPath) covers(rel string) bool {
	if pp.kind != protHookNames || rel == pp.rel {
		return true
	}
	return path.Dir(rel) == pp.rel && gitHookNames[path.Base(rel)]
}

// record stamps the entries at and under pp, and the way to it.
func (pp *protectedPath) record(v *view) {
	pp.way = map[string]stamp{}
	parts := strings.Split(pp.rel, "/")
	for i := 1; i < len(parts); i++ {
		way := strings.Join(parts[:i], "/")
		if fi, err := v.top.Lstat(way); err == nil {
			if st, ok := stampOf(fi); ok {
				pp.way[way] = st
			}
		}
	}
	entries := map[string]stamp{}
	walkProtected(v, pp.rel, func(rel string, st stamp, _ error) bool {
		if !pp.covers(rel) {
			return false
		}
		entries[rel] = st
		return len(entries) <= maxProtectedEntries
	})
	switch {
	case len(entries) <= maxProtectedEntries:
		pp.before = entries
		if pp.kind != protNamed {
			pp.sums = map[string][sha256.Size]byte{}
			for rel, st := range entries {
				if sum, ok := contentSum(v, rel, st); ok {
					pp.sums[rel] = sum
				}
			}
		}
	case pp.kind == protHooks:
		pp.kind = protHookNames // too large to audit whole: its hooks at least
		pp.record(v)
	}
}

// protChange is an entry of a protected path to neutralize.
type protChange struct {
	rel        string
	unreadable bool // a directory that could not be read
}

// changed returns the entries of pp to neutralize, shallowest first: a way
// to pp that is no longer made of what it was made of at the start or of
// directories (a symlink or a file put in place of one, through which pp
// would be found elsewhere), a directory at or under pp that is new (with
// everything in it), one it cannot read that the command could have
// written in, anything else new or changed and not inert. A directory that
// existed is judged by its entries, not by its own stamp (a removal in it
// leaves nothing behind to run); so is a removal in a transaction's upper
// layer (a whiteout). skip says which entries another rule judges (git's
// control entries, what the kernel held).
func (pp *protectedPath) changed(v *view, skip func(rel string) bool) []protChange {
	if pp.before == nil {
		return nil
	}
	// The way from the root down to pp must still be directories, or
	// what it was.
	parts := strings.Split(pp.rel, "/")
	for i := 1; i < len(parts); i++ {
		way := strings.Join(parts[:i], "/")
		fi, err := v.top.Lstat(way)
		if err != nil {
			return nil // pp is gone with its directory (an unreadable one is the git walk's)
		}
		st, _ := stampOf(fi)
		if v.lower != nil && st.whiteout() {
			return nil
		}
		if old, ok := pp.way[way]; !fi.IsDir() && (!ok || old != st) {
			return []protChange{{rel: way}}
		}
	}
	var out []protChange
	walkProtected(v, pp.rel, func(rel string, st stamp, err error) bool {
		if skip(rel) || !pp.covers(rel) {
			return false
		}
		if err != nil {
			out = append(out, protChange{rel: rel, unreadable: true})
			return false
		}
		old, existed := pp.before[rel]
		switch {
		case v.lower != nil && st.whiteout():
			return false // a removal
		case st.isDir() && (existed && old.isDir() || !existed && v.merged(rel)):
			return true // judged by its entries
		case existed && old == st:
			return true
		case pp.kind != protNamed && pp.sameContent(v, rel, st, old, existed):
			return false
		case pp.inert(v, rel, st):
			return false
		}
		out = append(out, protChange{rel: rel})
		return false // a new directory goes aside whole
	})
	return out
}

// maxSum bounds the files whose content is compared.
const maxSum = 256 << 10

// contentSum returns the SHA-256 of rel, a regular file of at most maxSum
// bytes (st).
func contentSum(v *view, rel string, st stamp) ([sha256.Size]byte, bool) {
	if st.mode&syscall.S_IFMT != syscall.S_IFREG || st.size > maxSum {
		return [sha256.Size]byte{}, false
	}
	b, ok := v.readTop(rel, maxSum)
	if !ok {
		return [sha256.Size]byte{}, false
	}
	return sha256.Sum256(b), true
}

// sameContent reports whether the regular file rel (st; old at the start,
// if it existed) holds what it held at the start, with the same mode: as
// recorded, or, new in a transaction's upper layer, as the workspace holds
// it.
func (pp *protectedPath) sameContent(v *view, rel string, st, old stamp, existed bool) bool {
	want, ok := pp.sums[rel]
	switch {
	case existed:
		if !ok || old.mode != st.mode {
			return false
		}
	case v.lower != nil && v.lowerShows(path.Dir(rel)):
		fi, err := v.lower.Lstat(rel)
		if err != nil {
			return false
		}
		lst, _ := stampOf(fi)
		b, ok := readFile(v.lower, rel, maxSum)
		if lst.mode != st.mode || !ok {
			return false
		}
		want = sha256.Sum256(b)
	default:
		return false
	}
	sum, ok := contentSum(v, rel, st)
	return ok && sum == want
}

// inert reports whether a new or changed entry of pp is harmless.
func (pp *protectedPath) inert(v *view, rel string, st stamp) bool {
	regular := st.mode&syscall.S_IFMT == syscall.S_IFREG
	switch pp.kind {
	case protHooks, protHookNames:
		return regular && modes.GitHookInert(path.Base(rel))
	case protConfig:
		if !regular || st.size > modes.MaxGitConfig {
			return false
		}
		b, ok := v.readTop(rel, modes.MaxGitConfig)
		return ok && modes.GitConfigSafe(b)
	}
	return false
}

// walkProtected calls visit for the entry rel of the view's top and, if it
// is a directory and visit returns true, for everything beneath it, parents
// first, in name order, never through a symlink. A directory it cannot read
// that the command could have written in (see gitWalk.unreadable) is
// visited with the error, and nothing beneath it.
func walkProtected(v *view, rel string, visit func(rel string, st stamp, err error) bool) {
	fi, err := v.top.Lstat(rel)
	if err != nil {
		return // nothing there (an unreadable way is the git walk's)
	}
	st, ok := stampOf(fi)
	if !ok || !visit(rel, st, nil) || !st.isDir() {
		return
	}
	d, err := v.top.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	var names []string
	if err == nil {
		if err = searchable(int(d.Fd())); err == nil {
			names, err = d.Readdirnames(-1)
		}
		d.Close()
	}
	if err != nil {
		if errors.Is(err, fs.ErrPermission) && v.couldHaveWritten(rel, fi) {
			visit(rel, st, err)
		}
		return
	}
	slices.Sort(names)
	for _, n := range names {
		walkProtected(v, path.Join(rel, n), visit)
	}
}
