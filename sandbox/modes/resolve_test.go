package modes

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// canonicalOracle is the resolver's canonical without its memory: every
// component asked of the file system again, through filepath.EvalSymlinks.
func canonicalOracle(p string) string {
	p = filepath.Clean(p)
	var rest []string
	for cur := p; ; cur = filepath.Dir(cur) {
		if c, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(append([]string{c}, rest...)...)
		}
		if cur == "/" || cur == "." {
			return p
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
	}
}

// TestResolverMatchesEvalSymlinks: one resolver, asked about every path of a
// tree full of symlink shapes in turn (so that each answer may come from
// what an earlier one remembered), says what filepath.EvalSymlinks says of
// each: the same path, or a failure where it fails; and canonical and entry
// say what they said before the resolver had a memory.
func TestResolverMatchesEvalSymlinks(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"a/b/c", "x/y", "deep/1/2/3"} {
		must(os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	must(os.WriteFile(filepath.Join(root, "a/file"), nil, 0o644))
	links := map[string]string{
		"rel":          "a/b",                    // relative, to a directory
		"abs":          filepath.Join(root, "x"), // absolute
		"a/b/up":       "../..",                  // climbs out of its directory
		"a/b/c/upfile": "../../file",             // to a file, through ".."
		"dangling":     "nowhere/at/all",         // to nothing
		"loop1":        "loop2",                  // a loop
		"loop2":        "loop1",
		"self":         "./self",                  // a loop to itself
		"chain":        "rel/c/../../b/c",         // a link through a link, with ".."
		"x/back":       "../a",                    // back up and across
		"x/toroot":     "/",                       // the root itself
		"x/dotdotroot": "../../../../../../../..", // above the root
		"slash":        "a/b/",                    // a trailing slash
		"deep/1/hop":   "2/3/../../2",             // down, up, down
		"tofile":       "a/file",
		"tofileslash":  "a/file/", // a file named as a directory
	}
	for name, target := range links {
		must(os.Symlink(target, filepath.Join(root, name)))
	}
	// A chain longer than the 255 links a walk may follow, and one within.
	for i := 0; i < 300; i++ {
		must(os.Symlink(fmt.Sprintf("l%d", i+1), filepath.Join(root, fmt.Sprintf("l%d", i))))
	}
	must(os.Symlink("a", filepath.Join(root, "l300")))
	var paths []string
	for _, p := range []string{
		"", "a", "a/b", "a/b/c", "a/file", "a/file/more", "a/missing", "a/missing/deeper",
		"rel", "rel/c", "rel/missing", "abs", "abs/y", "abs/y/missing/more",
		"a/b/up", "a/b/up/x/y", "a/b/c/upfile", "a/b/c/upfile/more",
		"dangling", "dangling/more", "loop1", "loop1/x", "self", "chain", "chain/more",
		"x/back", "x/back/b/c", "x/toroot", "x/toroot/tmp", "x/dotdotroot", "x/dotdotroot/tmp",
		"slash", "slash/c", "deep/1/hop", "deep/1/hop/3", "tofile", "tofile/x",
		"a/./b/../b/c", "a/b/c/../../..", "rel/../x", "tofileslash", "tofileslash/x",
		"l0", "l0/b", "l100", "l100/b", "l45", "l46", // 256 and 255 links
	} {
		paths = append(paths, filepath.Join(root, p), root+"/"+p)
	}
	paths = append(paths, "/", "/..", "/../..", "/proc/self/cwd", "/proc/self/root/tmp", "/no/such/path")
	r := newResolver()
	for _, p := range paths {
		want, werr := filepath.EvalSymlinks(p)
		got, gerr := r.evalSymlinks(p)
		if (werr == nil) != (gerr == nil) || got != want {
			t.Errorf("evalSymlinks(%q) = %q, %v; filepath.EvalSymlinks: %q, %v", p, got, gerr, want, werr)
		}
		if got, want := r.canonical(p), canonicalOracle(p); got != want {
			t.Errorf("canonical(%q) = %q, want %q", p, got, want)
		}
		cp := filepath.Clean(p)
		if got, want := r.entry(p), filepath.Join(canonicalOracle(filepath.Dir(cp)), filepath.Base(cp)); got != want {
			t.Errorf("entry(%q) = %q, want %q", p, got, want)
		}
	}
	// A relative path is filepath.EvalSymlinks's own.
	t.Chdir(root)
	for _, p := range []string{"rel/c", "dangling", "a/missing"} {
		want, werr := filepath.EvalSymlinks(p)
		got, gerr := r.evalSymlinks(p)
		if (werr == nil) != (gerr == nil) || got != want {
			t.Errorf("evalSymlinks(%q) = %q, %v; filepath.EvalSymlinks: %q, %v", p, got, gerr, want, werr)
		}
	}
}

// TestResolverAsksOnce: a path's lstat is asked once, however many paths go
// through it.
func TestResolverAsksOnce(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "h/.config"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := newResolver()
	for _, rel := range []string{".ssh/id_rsa", ".aws/credentials", ".config/gh/hosts.yml", ".config/gcloud", ".netrc"} {
		r.canonical(filepath.Join(root, "h", rel))
	}
	n := len(r.seen)
	for _, rel := range []string{".ssh/id_rsa", ".aws/credentials", ".config/gh/hosts.yml", ".config/gcloud", ".netrc"} {
		r.canonical(filepath.Join(root, "h", rel))
	}
	if len(r.seen) != n {
		t.Errorf("asking again grew the memory from %d to %d entries", n, len(r.seen))
	}
	// Each distinct path once: the components of root, h, the first
	// missing component of each name, and .config's two children.
	if want := len(splitPath(root)) + 1 + 6; n != want {
		t.Errorf("%d lstats for 5 paths under one home, want %d", n, want)
	}
}

func splitPath(p string) []string {
	var out []string
	for p != "/" && p != "." {
		out = append(out, filepath.Base(p))
		p = filepath.Dir(p)
	}
	return out
}
