package modes

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// DeviceSinks returns the devices writable in every confined mode.
func DeviceSinks() []string { return []string{"/dev/null", "/dev/zero", "/dev/full"} }

// TerminalDevices returns the terminal devices readable and writable in every
// confined mode, so that interactive programs keep working; /dev/pts is a
// directory of ptys.
func TerminalDevices() []string { return []string{"/dev/tty", "/dev/ptmx", "/dev/pts"} }

// DefaultProtected returns the workspace-relative paths that stay read-only
// inside the writable roots when the workspace is a repository at the start,
// besides ProtectedNames and whatever Options.Protect adds: the control files
// of its git directory that git executes or follows. The rest of every
// repository in the workspace (and these, where the workspace is not a
// repository yet) is covered by the sandbox's post-run audit.
func DefaultProtected() []string {
	return []string{".git/hooks", ".git/config", ".git/config.worktree", ".git/commondir", ".git/objects/info/alternates"}
}

// Options is what a caller asks for. Derive turns it into a Policy.
type Options struct {
	Mode       Mode
	Workspace  string   // default: the current directory
	AllowWrite []string // extra writable roots (workspace-write only); must exist
	Protect    []string // extra protected paths, absolute or workspace-relative
	// Unprotect takes names out of ProtectedNames (ErrUnprotect for any
	// other path).
	Unprotect []string
	// Network lets the command use the network without restriction;
	// Allowlist, when not nil, lets it out only through the sandbox's
	// egress proxy (confined modes; not with Network). Neither: no network.
	Network   bool
	Allowlist *Allowlist
	TempDir   string // $TMPDIR, writable under workspace-write when it exists
	// AllowBroadWorkspace lets the workspace and the AllowWrite roots be
	// the root directory, a home directory or an ancestor of one
	// (ErrBroadWorkspace otherwise). A broad TempDir is always refused.
	AllowBroadWorkspace bool
	// Homes are home directories (e.g. the command's $HOME) no writable
	// root may contain, besides this process's $HOME, the passwd home of
	// the real uid and, for uid 0, /root. The confined modes hide
	// HomeSecrets in each of these homes.
	Homes []string
	// DenyRead adds absolute paths to the deny-read set (confined modes);
	// AllowRead removes entries of it, or paths under one (see
	// Policy.DenyRead).
	DenyRead  []string
	AllowRead []string
	// Limits are the command's resource limits: nil means DefaultLimits(),
	// a zero field of a non-nil value means that resource is unlimited.
	Limits *Limits
	// NoCaches leaves the toolchain caches read-only under workspace-write
	// (Policy.Caches empty); CacheDir is where their upper layers live
	// ("": the home's HomeCacheDir). See ToolCaches.
	NoCaches bool
	CacheDir string
	// CacheHome is the home whose toolchain caches the command uses (its
	// $HOME); "": this process's $HOME. Only a home of this process's user
	// has caches: its $HOME, the passwd home of its uid, /root for root.
	CacheHome string
}

// Policy is a canonical, fully explicit sandbox policy. All paths are
// absolute, cleaned and free of symlinks.
type Policy struct {
	Mode          Mode     `json:"mode"`
	Workspace     string   `json:"workspace"`
	WritableRoots []string `json:"writableRoots"`
	Protected     []string `json:"protected"`
	Network       bool     `json:"network"`
	// Allowlist, in a confined mode without Network, is what the command
	// may reach through the egress proxy; nil: nothing.
	Allowlist *Allowlist `json:"allowlist,omitempty"`
	// DenyRead are the paths a confined command cannot read (a directory
	// with everything beneath it): HomeSecrets in every home of
	// Options.Homes, RootSecrets for root, Options.DenyRead, less
	// Options.AllowRead. Entries need not exist; the sandbox hides those
	// that do. Empty in danger-full-access.
	DenyRead []string `json:"denyRead"`
	// CredentialFiles are the deny-read paths that are tools' credential
	// files with settings (~/.npmrc, ~/.pypirc, pip.conf,
	// ~/.docker/config.json, cargo's credentials): a mount view shows a
	// copy of each without its secrets, read-only, instead of hiding it
	// whole (sandbox/internal/credfiles). A pip.conf is one only when it
	// holds a secret (else it is not hidden at all).
	CredentialFiles []string `json:"credentialFiles,omitempty"`
	// Limits are the command's resource limits (every mode; 0: unlimited).
	Limits Limits `json:"limits"`
	// Caches, under workspace-write, are the toolchain caches (ToolCaches)
	// the command writes through an overlay whose upper layer lies in
	// CacheDir, where a mount view exists: the user's cache is never
	// written. Without a mount view they stay read-only.
	Caches   []string `json:"caches,omitempty"`
	CacheDir string   `json:"cacheDir,omitempty"`
}

// ErrWorkspace is wrapped by Derive when the workspace cannot be opened.
var ErrWorkspace = errors.New("cannot open workspace")

// ErrWritableRoot is wrapped by Derive when an --allow-write root is unusable.
var ErrWritableRoot = errors.New("cannot use writable root")

// ErrCacheDir is wrapped by Derive when Options.CacheDir is unusable.
var ErrCacheDir = errors.New("cannot use the cache directory")

// Derive canonicalises o into a Policy. It fails, naming the path, when the
// workspace or an extra writable root does not exist or is not a directory,
// and, under workspace-write, with a *BroadWorkspaceError when a directory
// that would become writable is too broad (see ErrBroadWorkspace).
func Derive(o Options) (Policy, error) {
	if !o.Mode.Valid() {
		return Policy{}, fmt.Errorf("%w %d", ErrUnknownMode, int(o.Mode))
	}
	res := newResolver()
	ws := o.Workspace
	if ws == "" {
		wd, err := os.Getwd()
		if err != nil {
			return Policy{}, fmt.Errorf("%w: %w", ErrWorkspace, err)
		}
		ws = wd
	}
	ws, err := canonicalDir(ws)
	if err != nil {
		return Policy{}, fmt.Errorf("%w: %w", ErrWorkspace, err)
	}
	p := Policy{Mode: o.Mode, Workspace: ws, Network: o.Network, Limits: DefaultLimits()}
	if o.Limits != nil {
		p.Limits = *o.Limits
	}
	if err := p.Limits.Validate(); err != nil {
		return Policy{}, err
	}
	if o.Allowlist != nil && o.Network {
		return Policy{}, fmt.Errorf("%w: an allowlist needs the network off (the network on allows everything)", ErrAllowlist)
	}
	if o.Allowlist != nil && o.Mode != DangerFullAccess {
		al, err := o.Allowlist.canonical()
		if err != nil {
			return Policy{}, err
		}
		p.Allowlist = &al
	}
	if o.Mode == DangerFullAccess {
		if len(o.DenyRead) > 0 || len(o.AllowRead) > 0 {
			return Policy{}, fmt.Errorf("%w: danger-full-access hides nothing (deny-read and allow-read need a confined mode)", ErrDenyRead)
		}
		p.Network = true
		return p, nil
	}
	homes := homeDirs(res, o.Homes)
	if p.DenyRead, p.CredentialFiles, err = denyReadSet(res, homes, os.Getuid() == 0, o.DenyRead, o.AllowRead); err != nil {
		return Policy{}, err
	}
	if o.Mode != WorkspaceWrite {
		return p, p.deriveCheck()
	}
	broad := func(kind, dir string) error {
		if o.AllowBroadWorkspace && kind != BroadTempDir {
			return nil
		}
		return checkBroad(kind, dir, homes)
	}
	if err := broad(BroadWorkspace, ws); err != nil {
		return Policy{}, err
	}
	roots := []string{ws}
	for _, r := range o.AllowWrite {
		c, err := canonicalDir(r)
		if err != nil {
			return Policy{}, fmt.Errorf("%w: %w", ErrWritableRoot, err)
		}
		if err := broad(BroadWritableRoot, c); err != nil {
			return Policy{}, err
		}
		roots = append(roots, c)
	}
	// Environmental roots are used when present and silently skipped
	// otherwise; a TempDir too broad to be writable is refused, unless it
	// lies in one of the fixed ones (then it adds nothing).
	var fixed []string
	for _, r := range []string{"/tmp", "/dev/shm"} {
		if c, err := canonicalDir(r); err == nil {
			fixed = append(fixed, c)
		}
	}
	roots = append(roots, fixed...)
	if o.TempDir != "" {
		if c, err := canonicalDir(o.TempDir); err == nil && !withinAny(c, fixed) {
			if err := broad(BroadTempDir, c); err != nil {
				return Policy{}, err
			}
			roots = append(roots, c)
		}
	}
	p.WritableRoots = minimalRoots(roots)
	for _, h := range homes {
		for _, d := range PolicyDirs(h) {
			d = res.canonical(d)
			for _, r := range p.WritableRoots {
				if Within(r, d) {
					return Policy{}, fmt.Errorf("%w: %s lies in %s, dsh-sandbox's own policy directory, which stays read-only", ErrWritableRoot, r, d)
				}
			}
		}
	}

	names, err := protectedNames(o.Unprotect)
	if err != nil {
		return Policy{}, err
	}
	prot := namedProtected(res, p, names)
	for _, rel := range DefaultProtected() {
		prot = append(prot, gitProtected(res, ws, rel)...)
	}
	for _, h := range homes {
		for _, d := range PolicyDirs(h) {
			prot = append(prot, res.canonical(d), res.entry(d))
		}
	}
	for _, pp := range o.Protect {
		if pp == "" {
			return Policy{}, errors.New("empty protected path")
		}
		if !filepath.IsAbs(pp) {
			pp = filepath.Join(ws, pp)
		}
		prot = append(prot, res.canonical(pp), res.entry(pp))
	}
	// A protected path that is a symlink is protected twice: where it
	// points, and as the directory entry itself, so that replacing the link
	// is refused too.
	for _, pp := range prot {
		prot = append(prot, res.entry(pp))
	}
	p.Protected = dedupe(filterUnder(prot, p.WritableRoots))
	cacheHome := o.CacheHome
	if cacheHome == "" {
		cacheHome = os.Getenv("HOME")
	}
	// Only a home of this process's user (its $HOME, its passwd entry's):
	// the sandbox makes missing cache directories there, never where a
	// request's $HOME happens to point.
	if filepath.IsAbs(cacheHome) && slices.Contains(homeDirs(res, nil), res.canonical(cacheHome)) {
		if err := p.deriveCaches(res, res.canonical(cacheHome), o); err != nil {
			return Policy{}, err
		}
	}
	return p, p.deriveCheck()
}

// deriveCheck fails Derive when the deny-read set would hide the workspace
// or a writable root.
func (p Policy) deriveCheck() error {
	if err := p.checkDenyRead(); err != nil {
		return fmt.Errorf("%w: %w", ErrDenyRead, err)
	}
	return nil
}

// Writable reports whether a canonical path may be written under p: it lies
// in a writable root and not in a protected path, or it is a device sink or
// terminal device.
func (p Policy) Writable(path string) bool {
	if !p.Mode.Confines() {
		return true
	}
	if p.IsDevice(path) {
		return true
	}
	if p.Protects(path) {
		return false
	}
	return withinAny(path, p.WritableRoots)
}

// IsDevice reports whether path is a device sink or terminal device.
func (p Policy) IsDevice(path string) bool {
	for _, d := range DeviceSinks() {
		if path == d {
			return true
		}
	}
	for _, d := range TerminalDevices() {
		if Within(path, d) {
			return true
		}
	}
	return false
}

// Protects reports whether path is a protected path or lies beneath one.
func (p Policy) Protects(path string) bool {
	for _, pp := range p.Protected {
		if Within(path, pp) {
			return true
		}
	}
	return false
}

// Within reports whether path equals root or lies beneath it. Both must be
// clean absolute paths.
func Within(path, root string) bool {
	if root == "/" {
		return strings.HasPrefix(path, "/")
	}
	// (No root+"/": Derive compares every pair of a hundred paths.)
	return strings.HasPrefix(path, root) && (len(path) == len(root) || path[len(root)] == '/')
}

func canonicalDir(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	c, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(c)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s: not a directory", p)
	}
	f, err := os.Open(c)
	if err != nil {
		return "", err
	}
	f.Close()
	return c, nil
}

// gitProtected maps a default protected path (".git/hooks") onto the real
// git directories: a .git file (worktree, submodule) is itself protected and
// its gitdir and commondir get the same treatment. Without a .git at the
// start, nothing.
func gitProtected(r *resolver, ws, rel string) []string {
	dotgit := filepath.Join(ws, ".git")
	st, err := os.Lstat(dotgit)
	if err != nil {
		// Not a repository yet: `git init` must be able to make one; what
		// it holds at the end is audited.
		return nil
	}
	if st.IsDir() {
		p := filepath.Join(ws, rel)
		return []string{r.canonical(p), r.entry(p)}
	}
	out := []string{r.canonical(dotgit)}
	leaf := strings.TrimPrefix(rel, ".git/")
	gitdir := readGitdir(dotgit)
	if gitdir == "" {
		return out
	}
	out = append(out, r.canonical(filepath.Join(gitdir, leaf)))
	if b, err := os.ReadFile(filepath.Join(gitdir, "commondir")); err == nil {
		common := strings.TrimSpace(string(b))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitdir, common)
		}
		out = append(out, r.canonical(filepath.Join(common, leaf)))
	}
	return out
}

func readGitdir(dotgit string) string {
	f, err := os.Open(dotgit)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return ""
	}
	line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "gitdir:")
	if !ok {
		return ""
	}
	d := strings.TrimSpace(line)
	if !filepath.IsAbs(d) {
		d = filepath.Join(filepath.Dir(dotgit), d)
	}
	return d
}

// minimalRoots removes duplicates and roots nested inside another root.
func minimalRoots(roots []string) []string {
	roots = dedupe(roots)
	var out []string
	for _, r := range roots {
		nested := false
		for _, o := range roots {
			if o != r && Within(r, o) {
				nested = true
				break
			}
		}
		if !nested {
			out = append(out, r)
		}
	}
	return out
}

func filterUnder(paths, roots []string) []string {
	var out []string
	for _, p := range paths {
		if withinAny(p, roots) {
			out = append(out, p)
		}
	}
	return out
}

// withinAny reports whether path lies in one of roots.
func withinAny(path string, roots []string) bool {
	for _, r := range roots {
		if Within(path, r) {
			return true
		}
	}
	return false
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
