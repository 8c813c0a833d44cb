package modes

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ToolCaches returns the entries of a home directory where toolchains keep
// their download and build caches: Go's build and module caches, npm's,
// yarn's and pnpm's stores, pip's and uv's caches, cargo's registry and git
// checkouts, Maven's repository and Gradle's caches. Under workspace-write a
// confined command sees each one that exists (or whose parent does) as an
// overlay: the user's cache below, read-only, and the sandbox's own upper
// layer in CacheStore, where what the command adds lands. Nothing of a
// toolchain's programs is among them (~/go/bin, ~/.cargo/bin, ~/.npm's
// global prefix elsewhere): what the user's own tools run stays read-only.
func ToolCaches() []string {
	return []string{
		".cache/go-build", "go/pkg/mod",
		".npm", ".cache/yarn", ".yarn/berry/cache", ".cache/pnpm", ".local/share/pnpm/store",
		".cache/pip", ".cache/uv",
		".cargo/registry", ".cargo/git",
		".m2/repository", ".gradle/caches", ".gradle/wrapper",
	}
}

// CacheVariable returns the environment variable that points a tool at
// cache dir (one of Policy.Caches), or "" when none does (or it would point
// at more than the cache: CARGO_HOME holds cargo's bin). Without a mount
// view a command gets it set to the cache's upper layer, unless it has it
// already.
func CacheVariable(dir string) string {
	for _, c := range []struct{ entry, name string }{
		{".cache/go-build", "GOCACHE"}, {"go/pkg/mod", "GOMODCACHE"}, {".npm", "npm_config_cache"},
		{".cache/yarn", "YARN_CACHE_FOLDER"}, {".cache/pip", "PIP_CACHE_DIR"}, {".cache/uv", "UV_CACHE_DIR"},
	} {
		if strings.HasSuffix(dir, "/"+c.entry) {
			return c.name
		}
	}
	return ""
}

// HomeCacheDir is the entry of a home where dsh-sandbox keeps the upper
// layers of the toolchain caches (the default CacheStore): beneath
// HomeStateDir, so no confined command reads or writes it but through a
// cache's overlay.
const HomeCacheDir = HomeStateDir + "/caches"

// deriveCaches sets p.CacheStore and p.Caches under workspace-write (see
// Options.NoCaches): the store, outside every writable root, and the
// canonical directories of ToolCaches in home that exist, or whose parent
// does, or that lie in ~/.cache (the sandbox makes a missing one, empty,
// before the command starts), less those that overlap a writable root, a protected or
// deny-read path or the store, and those an overlay cannot name.
func (p *Policy) deriveCaches(res *resolver, home string, o Options) error {
	if o.NoCaches || home == "" {
		return nil
	}
	store := o.CacheDir
	if store == "" {
		store = filepath.Join(home, HomeCacheDir)
	} else if !filepath.IsAbs(store) {
		return fmt.Errorf("%w: %q is not an absolute path", ErrCacheDir, store)
	}
	store = res.canonical(store)
	if r := rootOf(p.WritableRoots, store); r != "" {
		if o.CacheDir == "" {
			// A writable home (AllowBroadWorkspace): its caches are
			// writable as they are.
			return nil
		}
		return fmt.Errorf("%w: %s lies in the writable root %s, where a confined command could change what later ones read: put it outside every writable root", ErrCacheDir, store, r)
	}
	overlaps := func(a string, set []string) bool {
		for _, b := range set {
			if Within(a, b) || Within(b, a) {
				return true
			}
		}
		return false
	}
	for _, e := range ToolCaches() {
		d := res.canonical(filepath.Join(home, e))
		if st, err := os.Stat(d); err != nil {
			// A missing cache is made when its parent exists, or in
			// the XDG cache directory (~/.cache, made too).
			parent := filepath.Dir(d)
			if strings.HasPrefix(e, ".cache/") {
				parent = home
			}
			if st, err := os.Stat(parent); err != nil || !st.IsDir() {
				continue
			}
		} else if !st.IsDir() {
			continue
		}
		if strings.ContainsAny(d, ",:\\\n") || overlaps(d, p.WritableRoots) || overlaps(d, p.Protected) ||
			overlaps(d, p.DenyRead) || overlaps(d, []string{store}) {
			continue
		}
		p.Caches = append(p.Caches, d)
	}
	if len(p.Caches) > 0 {
		p.CacheDir = store
	}
	return nil
}

// rootOf returns the root of roots that path lies in, or "".
func rootOf(roots []string, path string) string {
	for _, r := range roots {
		if Within(path, r) {
			return r
		}
	}
	return ""
}
