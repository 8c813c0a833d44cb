//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

// cacheScript is what a command does to the home's toolchain caches and
// programs: rewrites an entry of the user's build cache, adds one, removes
// one, and tries to write the user's files through the cache (a symlink to
// ~/.bashrc), to move the cache away, and to write the user's ~/go/bin.
const cacheScript = `
c=~/.cache/go-build
try() { if "$@" 2>/dev/null; then echo "$1 ok"; else echo "$1 failed"; fi; }
echo planted > $c/user-entry && echo rewrite ok
echo new > $c/new-entry && echo add ok
rm $c/other && echo remove ok
ln -s ~/.bashrc $c/link && echo link ok
(echo evil >> $c/link) 2>/dev/null && echo "through link ok" || echo "through link failed"
try mv $c ~/.cache/moved
(echo evil > ~/go/bin/tool) 2>/dev/null && echo "bin ok" || echo "bin failed"
`

// cacheHome makes a home with a warm Go build cache and a program in
// ~/go/bin, outside every writable root.
func cacheHome(t *testing.T, id identity) identity {
	t.Helper()
	id = withHome(t, id)
	for _, d := range []string{".cache", ".cache/go-build", "go", "go/bin"} {
		id.mkdirAt(t, filepath.Join(id.home, d))
	}
	id.writeOwned(t, filepath.Join(id.home, ".cache/go-build/user-entry"), "mine\n", 0o644)
	id.writeOwned(t, filepath.Join(id.home, ".cache/go-build/other"), "other\n", 0o644)
	id.writeOwned(t, filepath.Join(id.home, "go/bin/tool"), "#!/bin/sh\necho user tool\n", 0o755)
	id.writeOwned(t, filepath.Join(id.home, ".bashrc"), "# mine\n", 0o644)
	return id
}

// TestCachesOverlay: under workspace-write a command writes the toolchain
// caches through an overlay: what it changes there is seen by the next
// command, never by the user's cache; it cannot reach the user's files
// through a cache, move one, or write the user's programs (~/go/bin);
// `caches clean` gives the user's cache back; --no-caches leaves the caches
// read-only (EROFS, a fact). On a host without a mount view the caches stay
// read-only the same way.
func TestCachesOverlay(t *testing.T) {
	forEachHostOf(t, supervisedHosts, func(t *testing.T, h hostConfig, id identity) {
		id = cacheHome(t, id)
		ws := id.workspace(t)
		before := userFiles(t, id.home)
		run := func(script string, flags ...string) result {
			return id.run(t, runOpts{Wrap: h.wrap(), Flags: append(sandboxFlags("workspace-write", ws), flags...), Argv: bash(script), Dir: ws})
		}
		want := "overlay"
		if !h.onHost().mountView() {
			want = "variables"
		}
		pr := id.run(t, runOpts{Wrap: h.wrap(), Flags: []string{"--probe", "--json"}, NoReport: true, Dir: ws})
		if p := parseProbe(t, pr); p.Caches != want {
			t.Errorf("probe caches = %q, want %q", p.Caches, want)
		}
		r := run(cacheScript)
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		rep := requireReport(t, r)
		for _, s := range []string{"through link failed", "mv failed", "bin failed"} {
			if !strings.Contains(r.Stdout, s) {
				t.Errorf("stdout lacks %q: %q", s, r.Stdout)
			}
		}
		if after := userFiles(t, id.home); after != before {
			t.Errorf("the user's caches, programs and dotfiles changed:\n%s\nwant\n%s", after, before)
		}

		if !h.onHost().mountView() {
			// No mount view: the user's cache is read-only, as outside
			// every writable root; Go gets GOCACHE, the sandbox's layer,
			// kept for the next command, unless it set one itself or ran
			// with --no-caches.
			for _, s := range []string{"rewrite ok", "add ok"} {
				if strings.Contains(r.Stdout, s) {
					t.Errorf("stdout has %q: %q", s, r.Stdout)
				}
			}
			requireDenial(t, r, "workspace-write", "write", filepath.Join(id.home, ".cache/go-build/new-entry"))
			if c := filepath.Join(id.home, ".cache/go-build"); !contains(rep.Enforcement.Caches, c) {
				t.Errorf("enforcement caches %q lack %q", rep.Enforcement.Caches, c)
			}
			store := filepath.Join(id.home, ".local/state/dsh-sandbox/caches")
			r = run(`echo "$GOCACHE"; echo kept > "$GOCACHE/entry"`)
			if r.Exit != 0 {
				t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
			}
			if !strings.HasPrefix(r.Stdout, store+"/") {
				t.Errorf("GOCACHE %q does not lie in the store %s", r.Stdout, store)
			}
			r = run(`cat "$GOCACHE/entry"`)
			if r.Stdout != "kept\n" {
				t.Errorf("stdout = %q, want %q (%v)", r.Stdout, "kept\n", r)
			}
			r = run(`echo "[$GOCACHE]"`, "--no-caches")
			if r.Stdout != "[]\n" {
				t.Errorf("with --no-caches stdout = %q, want %q (%v)", r.Stdout, "[]\n", r)
			}
			if c := requireReport(t, r).Enforcement.Caches; len(c) != 0 {
				t.Errorf("with --no-caches enforcement caches = %q, want none", c)
			}
			r = id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags("workspace-write", ws), Argv: bash(`echo "$GOCACHE"`), Dir: ws, Env: []string{"GOCACHE=" + ws}})
			if r.Stdout != ws+"\n" {
				t.Errorf("stdout = %q, want %q: the command's own GOCACHE is kept (%v)", r.Stdout, ws+"\n", r)
			}
			if after := userFiles(t, id.home); after != before {
				t.Errorf("the user's files changed:\n%s\nwant\n%s", after, before)
			}
			return
		}
		if c := filepath.Join(id.home, ".cache/go-build"); !contains(rep.Enforcement.Caches, c) {
			t.Errorf("enforcement caches %q lack %q", rep.Enforcement.Caches, c)
		}
		if m := filterPrefix(rep.Enforcement.Caches, filepath.Join(id.home, "go/")); len(m) != 0 {
			t.Errorf("enforcement caches %q: ~/go/pkg does not exist: no module cache is made", m)
		}
		for _, s := range []string{"rewrite ok", "add ok", "remove ok", "link ok"} {
			if !strings.Contains(r.Stdout, s) {
				t.Errorf("stdout lacks %q: %q", s, r.Stdout)
			}
		}
		if len(rep.Changes) != 0 {
			t.Errorf("changes = %+v, want none: a cache's changes are the sandbox's, not the command's", rep.Changes)
		}

		// The next command sees what the first one left.
		r = run(`c=~/.cache/go-build; cat $c/user-entry $c/new-entry; ls $c`)
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		if want := "planted\nnew\nlink\nnew-entry\nuser-entry\n"; r.Stdout != want {
			t.Errorf("stdout = %q, want %q", r.Stdout, want)
		}
		// Both overlays were volatile (the kernel leaves its marker in the
		// work directory of each mount; the first's was swept beside the
		// second command): a command's end syncs nothing of the home's
		// filesystem.
		if m, _ := filepath.Glob(filepath.Join(id.home, ".local/state/dsh-sandbox/caches/*go-build*/work/*/work/incompat/volatile")); len(m) != 1 {
			t.Errorf("the go-build entry holds no volatile marker (%q): its overlay was not volatile", m)
		}

		// --no-caches: read-only.
		r = run(`echo x > ~/.cache/go-build/x`, "--no-caches")
		if r.Exit == 0 {
			t.Errorf("exit = 0, want a failure (%v)", r)
		}
		if !strings.Contains(r.Stderr, "Read-only file system") {
			t.Errorf("stderr lacks %q: %q", "Read-only file system", r.Stderr)
		}
		if c := requireReport(t, r).Enforcement.Caches; len(c) != 0 {
			t.Errorf("with --no-caches enforcement caches = %q, want none", c)
		}
		requireDenial(t, r, "workspace-write", "write", filepath.Join(id.home, ".cache/go-build/x"))

		// caches clean: the user's cache again.
		c := id.run(t, runOpts{Argv: nil, Flags: []string{"caches", "clean"}, NoReport: true})
		if c.Exit != 0 {
			t.Fatalf("caches clean: exit = %d, want 0 (%v)", c.Exit, c)
		}
		if want := "cleaned " + filepath.Join(id.home, ".local/state/dsh-sandbox/caches") + "\n"; c.Stdout != want {
			t.Errorf("caches clean: stdout = %q, want %q", c.Stdout, want)
		}
		r = run(`c=~/.cache/go-build; cat $c/user-entry; ls $c`)
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		if want := "mine\nother\nuser-entry\n"; r.Stdout != want {
			t.Errorf("stdout = %q, want %q", r.Stdout, want)
		}
		if after := userFiles(t, id.home); after != before {
			t.Errorf("the user's files changed:\n%s\nwant\n%s", after, before)
		}
	})
}

// TestCacheEmptyBound: a cache the user has nothing in is the sandbox's
// layer alone, bound there (nosuid, nodev) instead of an overlay: the
// command writes it, the next command sees it, the user's directory stays
// empty, and a link in it reaches nothing of the user's. Once the user has
// put something there, the next command gets an overlay again, which shows
// both.
func TestCacheEmptyBound(t *testing.T) {
	forEachHostOf(t, supervisedHosts, func(t *testing.T, h hostConfig, id identity) {
		if !h.onHost().mountView() {
			t.Log("no mount view: the caches are variables here (TestCachesOverlay)")
			return
		}
		id = cacheHome(t, id)
		ws := id.workspace(t)
		pip := filepath.Join(id.home, ".cache/pip")
		before := userFiles(t, id.home)
		run := func(script string) result {
			r := id.run(t, runOpts{Wrap: h.wrap(), Flags: sandboxFlags("workspace-write", ws), Argv: bash(script), Dir: ws})
			if r.Exit != 0 {
				t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
			}
			if c := requireReport(t, r).Enforcement.Caches; !contains(c, pip) {
				t.Errorf("enforcement caches %q lack %q", c, pip)
			}
			return r
		}
		// The mount at the cache: its type and its options.
		const mount = `m() { grep " $1 " /proc/self/mountinfo | tail -n 1 | sed 's/^[^ ]* [^ ]* [^ ]* [^ ]* [^ ]* \([^ ]*\).* - \([^ ]*\) .*/\2 \1/'; }; `
		r := run(mount + `m ~/.cache/pip; echo wheel > ~/.cache/pip/wheel && echo write ok
ln -s ~/.bashrc ~/.cache/pip/link; (echo evil >> ~/.cache/pip/link) 2>/dev/null && echo "through link ok" || echo "through link failed"`)
		fields := strings.Fields(r.Stdout)
		if len(fields) < 2 || fields[0] == "overlay" || !strings.Contains(fields[1], "nosuid") || !strings.Contains(fields[1], "nodev") {
			t.Errorf("the empty cache's mount = %q, want a bind (not an overlay) with nosuid and nodev", r.Stdout)
		}
		for _, s := range []string{"write ok", "through link failed"} {
			if !strings.Contains(r.Stdout, s) {
				t.Errorf("stdout lacks %q: %q", s, r.Stdout)
			}
		}
		if after := userFiles(t, id.home); after != before {
			t.Errorf("the user's files changed:\n%s\nwant\n%s", after, before)
		}
		if names, err := os.ReadDir(pip); err != nil || len(names) != 0 {
			t.Errorf("the user's %s holds %v (%v), want nothing", pip, names, err)
		}
		r = run(`cat ~/.cache/pip/wheel`)
		if r.Stdout != "wheel\n" {
			t.Errorf("the next command reads %q, want %q", r.Stdout, "wheel\n")
		}
		// The user's own entry: an overlay again, showing both.
		id.writeOwned(t, filepath.Join(pip, "mine"), "mine\n", 0o644)
		r = run(mount + `m ~/.cache/pip; cat ~/.cache/pip/mine ~/.cache/pip/wheel`)
		if want := "mine\nwheel\n"; !strings.HasPrefix(r.Stdout, "overlay ") || !strings.HasSuffix(r.Stdout, want) {
			t.Errorf("stdout = %q, want an overlay showing %q", r.Stdout, want)
		}
	})
}

// filterPrefix keeps the entries of list that start with one of prefixes.
func filterPrefix(list []string, prefixes ...string) []string {
	var out []string
	for _, s := range list {
		for _, p := range prefixes {
			if strings.HasPrefix(s, p) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// TestCacheStoreRefused: a cache store in a writable root (where any
// confined command could plant what later ones build with) is refused
// before anything runs, in one line; so is a relative one.
func TestCacheStoreRefused(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		id = withHome(t, id)
		ws := id.workspace(t)
		for _, c := range []struct{ store, want string }{
			{filepath.Join(ws, "store"), "lies in the writable root /tmp"}, // the workspace lies in /tmp
			{"store", "is not an absolute path"},
		} {
			r := id.run(t, runOpts{Flags: append(sandboxFlags("workspace-write", ws), "--cache-dir", c.store), Argv: bash("touch ran"), Dir: ws})
			requireSetupRefused(t, r)
			for _, s := range []string{"cannot use the cache directory", c.want} {
				if !strings.Contains(r.Stderr, s) {
					t.Errorf("stderr lacks %q: %q", s, r.Stderr)
				}
			}
			requireAbsent(t, filepath.Join(ws, "ran"))
			if _, err := os.Stat(filepath.Join(ws, "store")); !os.IsNotExist(err) {
				t.Errorf("stat of the store: %v, want it not made", err)
			}
		}
	})
}

// TestCacheHeldByAnotherCommand: while a command uses a cache's overlay (a
// background dev server, say), the next command gets that cache read-only
// (two overlays on one upper layer are undefined), and the cache is back
// once the first command ended.
func TestCacheHeldByAnotherCommand(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		id = cacheHome(t, id)
		ws := id.workspace(t)
		cache := filepath.Join(id.home, ".cache/go-build")
		view := !simulatedHostLacks("mount-view")
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pw.Close()
		s := id.start(t, runOpts{Flags: sandboxFlags("workspace-write", ws), Argv: bash("echo held; cat >/dev/null"), Dir: ws, Stdin: pr})
		pr.Close()
		if err := waitOutput(s, "held", testtime.Scale(time.Minute)); err != nil {
			s.cmd.Process.Kill()
			t.Fatalf("the first command did not start: %v", err)
		}
		r := id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws), Argv: bash("echo x > ~/.cache/go-build/second"), Dir: ws})
		if r.Exit == 0 {
			t.Errorf("exit = 0, want a failure (%v)", r)
		}
		if !strings.Contains(r.Stderr, "Read-only file system") {
			t.Errorf("stderr lacks %q: %q", "Read-only file system", r.Stderr)
		}
		if c := requireReport(t, r).Enforcement.Caches; contains(c, cache) {
			t.Errorf("enforcement caches %q hold %q, held by the first command", c, cache)
		}

		pw.Close()
		first := s.wait(t, testtime.Scale(time.Minute))
		if first.Exit != 0 {
			t.Fatalf("first command: exit = %d, want 0 (%v)", first.Exit, first)
		}
		if c := requireReport(t, first).Enforcement.Caches; !contains(c, cache) {
			t.Errorf("first command: enforcement caches %q lack %q", c, cache)
		}
		third := "echo x > ~/.cache/go-build/third && echo written"
		if !view {
			// No mount view: the sandbox's layer, through GOCACHE
			// (TestCachesOverlay).
			third = `echo x > "$GOCACHE/third" && echo written`
		}
		r = id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws), Argv: bash(third), Dir: ws})
		if r.Exit != 0 {
			t.Fatalf("exit = %d, want 0 (%v)", r.Exit, r)
		}
		if r.Stdout != "written\n" {
			t.Errorf("stdout = %q, want %q", r.Stdout, "written\n")
		}
		if c := requireReport(t, r).Enforcement.Caches; !contains(c, cache) {
			t.Errorf("enforcement caches %q lack %q", c, cache)
		}
	})
}
