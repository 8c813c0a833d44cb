//go:build linux

package audit

import (
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
)

// maxProtectedEntries bounds the entries recorded under one protected path.
// A larger tree at the start (an IDE's caches) is left to the kernel layers
// and the supervisor's pre-denial: unaudited.
const maxProtectedEntries = 10000

// protectedPath is one protected path of an audited root, by its path
// relative to the root, with the entries at and under it at the start.
type protectedPath struct {
	rel    string
	before map[string]stamp // nil: not audited (too many entries)
}

// record stamps the entries at and under pp.
func (pp *protectedPath) record(root *os.Root) {
	entries := map[string]stamp{}
	walkProtected(root, pp.rel, func(rel string, st stamp) bool {
		entries[rel] = st
		return len(entries) <= maxProtectedEntries
	})
	if len(entries) <= maxProtectedEntries {
		pp.before = entries
	}
}

// changed returns the entries of pp to neutralize, shallowest first: a way
// to pp that is no longer made of directories (a symlink or a file put in
// place of one, through which pp would be found elsewhere), a directory at
// or under pp that is new (with everything in it), anything else new or
// changed. A directory that existed is judged by its entries, not by its own
// stamp (a removal in it leaves nothing behind to run). skip says which
// entries another rule judges (git's control entries, what the kernel held).
func (pp *protectedPath) changed(root *os.Root, skip func(rel string) bool) []string {
	if pp.before == nil {
		return nil
	}
	// The way from the root down to pp must still be directories.
	parts := strings.Split(pp.rel, "/")
	for i := 1; i < len(parts); i++ {
		way := strings.Join(parts[:i], "/")
		fi, err := root.Lstat(way)
		if err != nil {
			return nil // pp is gone with its directory
		}
		if !fi.IsDir() {
			return []string{way}
		}
	}
	var out []string
	walkProtected(root, pp.rel, func(rel string, st stamp) bool {
		if skip(rel) {
			return false
		}
		old, existed := pp.before[rel]
		switch {
		case st.isDir() && existed && old.isDir():
			return true // judged by its entries
		case existed && old == st:
			return true
		}
		out = append(out, rel)
		return false // a new directory goes aside whole
	})
	return out
}

// walkProtected calls visit for the entry rel of root and, if it is a
// directory and visit returns true, for everything beneath it, parents
// first, in name order, never through a symlink.
func walkProtected(root *os.Root, rel string, visit func(rel string, st stamp) bool) {
	fi, err := root.Lstat(rel)
	if err != nil {
		return // nothing there
	}
	st, ok := stampOf(fi)
	if !ok || !visit(rel, st) || !st.isDir() {
		return
	}
	d, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return // unreadable here: unreadable for the user's programs too
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return
	}
	slices.Sort(names)
	for _, n := range names {
		walkProtected(root, path.Join(rel, n), visit)
	}
}
