package modes

import (
	"errors"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// resolver resolves symlinks for one Derive. It remembers each path's lstat
// (and a symlink's target), so that the hundred-odd paths a policy names
// under a few homes and a workspace cost one lstat per distinct path, not
// one per path and component: the default workspace-write policy took about
// 600 lstats, most of them of the same few directories, and takes about 150.
// It is one look at the file system and the passwd database, made and
// dropped by its Derive: nothing is kept across Derives.
type resolver struct {
	seen map[string]lstatResult
	// home is the real uid's passwd home ("" when there is none), looked
	// up once: a lookup can go to the network (NSS with LDAP or sssd).
	home     string
	homeDone bool
}

// lstatResult is what lstat said about one path: its mode and, for a
// symlink, its target.
type lstatResult struct {
	mode fs.FileMode
	link string
	err  error
}

func newResolver() *resolver { return &resolver{seen: map[string]lstatResult{}} }

// passwdHome is the home directory of the real uid's passwd entry, or "".
func (r *resolver) passwdHome() string {
	if !r.homeDone {
		if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil {
			r.home = u.HomeDir
		}
		r.homeDone = true
	}
	return r.home
}

// lstat is os.Lstat, then os.Readlink for a symlink, each path asked once.
func (r *resolver) lstat(p string) lstatResult {
	if e, ok := r.seen[p]; ok {
		return e
	}
	var e lstatResult
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		e.err = err
	case fi.Mode()&fs.ModeSymlink != 0:
		e.mode = fi.Mode()
		e.link, e.err = os.Readlink(p)
	default:
		e.mode = fi.Mode()
	}
	r.seen[p] = e
	return e
}

// errTooManyLinks is filepath.EvalSymlinks's limit, at the same count.
var errTooManyLinks = errors.New("EvalSymlinks: too many links")

// evalSymlinks is filepath.EvalSymlinks with r's memory: the same result
// and the same failures, component by component (a missing component, a
// non-directory followed by more, more than 255 links). Only for an
// absolute path on a system whose paths are Unix's; anything else goes to
// filepath.EvalSymlinks.
func (r *resolver) evalSymlinks(path string) (string, error) {
	if os.PathSeparator != '/' || !filepath.IsAbs(path) {
		return filepath.EvalSymlinks(path)
	}
	dest := "/"
	links := 0
	for rest := path; ; {
		rest = strings.TrimLeft(rest, "/")
		if rest == "" {
			break
		}
		name, after, more := strings.Cut(rest, "/")
		if more {
			after = "/" + after
		}
		rest = after
		switch name {
		case ".":
			continue
		case "..":
			dest = parentKeepingDotDot(dest)
			continue
		}
		if !strings.HasSuffix(dest, "/") {
			dest += "/"
		}
		dest += name
		e := r.lstat(dest)
		if e.err != nil {
			return "", e.err
		}
		if e.mode&fs.ModeSymlink == 0 {
			if more && !e.mode.IsDir() {
				return "", syscall.ENOTDIR
			}
			continue
		}
		if links++; links > 255 {
			return "", errTooManyLinks
		}
		rest = e.link + rest
		if strings.HasPrefix(e.link, "/") {
			dest = "/"
		} else {
			dest = dropLast(dest)
		}
	}
	return filepath.Clean(dest), nil
}

// parentKeepingDotDot takes one component off dest for a "..", as
// filepath.EvalSymlinks does: where dest has no component after its root
// to take (or ends in a ".." it kept), it keeps the "..".
func parentKeepingDotDot(dest string) string {
	i := strings.LastIndexByte(dest, '/')
	if i < 1 || dest[i+1:] == ".." {
		if dest != "/" {
			dest += "/"
		}
		return dest + ".."
	}
	return dest[:i]
}

// dropLast takes the last component off dest, for a relative link that
// replaces it ("/" stays "/").
func dropLast(dest string) string {
	i := strings.LastIndexByte(dest, '/')
	if i < 1 {
		return "/"
	}
	return dest[:i]
}

// canonical resolves symlinks in the longest existing prefix of p and
// appends the missing rest unchanged.
func (r *resolver) canonical(p string) string {
	p = filepath.Clean(p)
	var rest []string
	for cur := p; ; cur = filepath.Dir(cur) {
		if c, err := r.evalSymlinks(cur); err == nil {
			return filepath.Join(append([]string{c}, rest...)...)
		}
		if cur == "/" || cur == "." {
			return p
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
	}
}

// entry resolves symlinks in the directory part of p only: the name of the
// directory entry p designates, whatever it points to.
func (r *resolver) entry(p string) string {
	p = filepath.Clean(p)
	return filepath.Join(r.canonical(filepath.Dir(p)), filepath.Base(p))
}
