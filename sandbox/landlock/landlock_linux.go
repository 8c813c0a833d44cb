//go:build linux

package landlock

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// ErrUnavailable is returned by ABI when the kernel does not offer Landlock.
var ErrUnavailable = errors.New("landlock is not available")

// ABI returns the kernel's Landlock ABI version. It fails with an error
// wrapping ErrUnavailable when Landlock is not compiled in, not enabled in the
// lsm= list, or blocked (ENOSYS/EOPNOTSUPP).
func ABI() (int, error) {
	v, err := getABI()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if v < 1 {
		return 0, fmt.Errorf("%w: ABI %d", ErrUnavailable, v)
	}
	return v, nil
}

// Features says which guarantees an ABI can give.
type Features struct {
	ABI         int  `json:"abi"`
	Refer       bool `json:"refer"`       // ABI 2: cross-directory rename/link
	Truncate    bool `json:"truncate"`    // ABI 3
	TCP         bool `json:"tcp"`         // ABI 4
	IoctlDev    bool `json:"ioctlDev"`    // ABI 5
	Scopes      bool `json:"scopes"`      // ABI 6: abstract unix sockets, signals
	Audit       bool `json:"audit"`       // ABI 7
	ResolveUnix bool `json:"resolveUnix"` // ABI 9: pathname unix sockets
	UDP         bool `json:"udp"`         // ABI 10
}

// FeaturesOf returns the features of ABI v.
func FeaturesOf(v int) Features {
	return Features{ABI: v, Refer: v >= 2, Truncate: v >= 3, TCP: v >= 4, IoctlDev: v >= 5,
		Scopes: v >= 6, Audit: v >= 7, ResolveUnix: v >= 9, UDP: v >= 10}
}

// Names lists the features present, for display.
func (f Features) Names() []string {
	var out []string
	if f.ABI >= 1 {
		out = append(out, "filesystem")
	}
	for _, x := range []struct {
		on   bool
		name string
	}{{f.Refer, "refer"}, {f.Truncate, "truncate"}, {f.TCP, "tcp"}, {f.IoctlDev, "ioctl-dev"},
		{f.Scopes, "scopes"}, {f.Audit, "audit"}, {f.ResolveUnix, "resolve-unix"}, {f.UDP, "udp"}} {
		if x.on {
			out = append(out, x.name)
		}
	}
	return out
}

const (
	fsRead  = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	fsFile  = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	fsWrite = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR |
		unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM | unix.LANDLOCK_ACCESS_FS_REFER | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV | accessFSResolveUnix
)

// handledFS returns every filesystem right ABI v knows.
func handledFS(v int) uint64 {
	h := uint64(1<<13 - 1) // ABI 1: execute .. make_sym
	if v >= 2 {
		h |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if v >= 3 {
		h |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if v >= 5 {
		h |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	if v >= 9 {
		h |= accessFSResolveUnix
	}
	return h
}

type rule struct {
	path   string
	access uint64
	kind   kind // what the directory listing said path is, if it was listed
	// listed: path is an entry of a directory the derivation listed
	// (grantBeneath), which vouches for it (see reads).
	listed bool
	// strict: path must be a directory, named without a symlink in its
	// last component (Options.WritableDirs); anything else fails Build.
	strict bool
}

// kind is the type of a rule's path as a directory listing (d_type) gave
// it, which spares Build an fstat per rule.
type kind uint8

const (
	kindUnknown kind = iota // not listed: Build looks
	kindDir
	kindOther // a file, device, socket or FIFO (listings skip symlinks)
)

// Ruleset is a Landlock ruleset derived from a policy for one ABI. It is a
// value: building it opens nothing; Restrict does the work.
type Ruleset struct {
	features   Features
	handledFS  uint64
	handledNet uint64
	scoped     uint64
	rules      []rule
	netPorts   []uint16 // TCP ports connect is allowed to
	masked     []string // Masked(p): the deny-read paths left out of every read right
	existing   []string // the deny-read paths that exist (ExistingDenyRead)
}

// Options change what ForABIWith derives.
type Options struct {
	// CarveProtected leaves the policy's protected paths that lie in the
	// workspace out of every write right (see Carved), for a host where no
	// other layer protects them. It costs the directories on the way from a
	// writable root down to each of them (the workspace and .git, say)
	// every change of their own entries: Landlock rights are hierarchical,
	// so any write right on such a directory would reach the protected path
	// beneath it.
	CarveProtected bool
	// ConnectTCP are the TCP ports the command may still connect to while
	// the policy's network is off (ABI 4): the egress proxy's and the
	// allowlist's loopback hosts'. Landlock checks ports only, not
	// addresses; the supervisor checks the address.
	ConnectTCP []uint16
	// OwnLoopback leaves TCP and UDP ports unhandled while the network is
	// off: the command is expected in a net namespace of its own, whose
	// only interface is its loopback (servers, tests), and the supervisor
	// performs its binds and connects (the filter's seccomp.Spec.Inet).
	OwnLoopback bool
	// SupervisedBinds leaves TCP and UDP binds unhandled while the network
	// is off: the supervisor decides every bind (an allowlist's, which
	// needs it): in a net namespace of the command's own, servers on its
	// loopback; without one, no port of the host's.
	SupervisedBinds bool
	// WritableDirs get every right a writable root gets, beyond the
	// policy's roots: the upper layers of the toolchain caches that a
	// command without a mount view writes directly (see
	// modes.Policy.Caches). Each must be a directory, named without a
	// symlink in its last component, or Build fails.
	WritableDirs []string
}

// Carved returns the protected paths of p that CarveProtected leaves out of
// every write right: those in the workspace that exist (as anything, a
// dangling link included). Others are not carved: one in /tmp (an
// executor's spill directory) would cost /tmp its own entries, and so every
// temporary file and heredoc; one that does not exist would cost its
// directory every new entry — the workspace every new top-level file for a
// missing .envrc — so those are left to the supervisor's pre-denial and the
// post-run audit.
func Carved(p modes.Policy) []string { return carved(p, nil) }

// carved is Carved, each path's existence kept in rec (nil: not kept).
func carved(p modes.Policy, rec *reads) []string {
	if p.Mode != modes.WorkspaceWrite {
		return nil
	}
	var out []string
	for _, pp := range p.Protected {
		if modes.Within(pp, p.Workspace) && pp != p.Workspace && rec.exists(pp, false) {
			out = append(out, pp)
		}
	}
	return out
}

// Masked returns the deny-read paths of p that the ruleset leaves out of
// every read right: those that exist and lie in no writable root. A path in
// a writable root is hidden by the mount view only: Landlock would have to
// take from the root (and every directory on the way) the rights on its own
// entries, so that no file created there later could be read or written.
func Masked(p modes.Policy) []string {
	out, _ := masked(p, nil)
	return out
}

// masked is Masked, and the deny-read paths that exist (whether in a
// writable root or not), each path's existence kept in rec (nil: not kept).
func masked(p modes.Policy, rec *reads) (out, existing []string) {
	if !p.Mode.Confines() {
		return nil, nil
	}
	for _, d := range p.DenyRead {
		if !rec.exists(d, true) {
			continue // nothing there to read
		}
		existing = append(existing, d)
		inRoot := false
		for _, r := range p.WritableRoots {
			inRoot = inRoot || modes.Within(d, r)
		}
		if !inRoot {
			out = append(out, d)
		}
	}
	return out, existing
}

// ForABI derives the ruleset enforcing p on a kernel with Landlock ABI v.
// Filesystem: read and execute everywhere but on device nodes and the
// masked deny-read paths (see fsRules), every right under the writable roots, file rights on the
// device sinks, /dev/tty and /dev/ptmx, read on the random devices; none on
// the host's /dev/pts. Network (when p
// denies it): TCP/UDP ports all denied, pathname unix sockets only under the
// writable roots, abstract unix sockets scoped. Signals are always scoped.
func ForABI(p modes.Policy, v int) Ruleset { return ForABIWith(p, v, Options{}) }

// ForABIWith is ForABI with options.
func ForABIWith(p modes.Policy, v int, o Options) Ruleset { return derive(p, v, o, nil) }

// derive is ForABIWith, what it reads of the filesystem kept in rec (nil:
// not kept).
func derive(p modes.Policy, v int, o Options, rec *reads) Ruleset {
	rs := Ruleset{features: FeaturesOf(v), handledFS: handledFS(v)}
	if !p.Network {
		if v >= 4 && !o.OwnLoopback {
			rs.handledNet |= unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
			rs.netPorts = o.ConnectTCP
			if !o.SupervisedBinds {
				rs.handledNet |= unix.LANDLOCK_ACCESS_NET_BIND_TCP
			}
		}
		if v >= 10 && !o.OwnLoopback {
			rs.handledNet |= accessNetConnectSendUDP
			if !o.SupervisedBinds {
				rs.handledNet |= accessNetBindUDP
			}
		}
		if v >= 6 {
			rs.scoped |= unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		}
	} else {
		rs.handledFS &^= accessFSResolveUnix
	}
	if v >= 6 {
		rs.scoped |= unix.LANDLOCK_SCOPE_SIGNAL
	}
	var carve []string
	if o.CarveProtected {
		carve = carved(p, rec)
	}
	rs.masked, rs.existing = masked(p, rec)
	rs.rules = append(rs.rules, fsRules(rec, p.WritableRoots, carve, rs.masked)...)
	for _, d := range o.WritableDirs {
		rs.rules = append(rs.rules, rule{path: d, access: fsRead | fsWrite, kind: kindDir, strict: true})
	}
	for _, d := range modes.DeviceSinks() {
		rs.rules = append(rs.rules, rule{path: d, access: fsFile &^ unix.LANDLOCK_ACCESS_FS_EXECUTE})
	}
	for _, d := range randomDevices {
		rs.rules = append(rs.rules, rule{path: d, access: unix.LANDLOCK_ACCESS_FS_READ_FILE})
	}
	for _, d := range modes.TerminalDevices() {
		if d == hostPts {
			continue // the host's ptys are other terminals; see PtyAccess
		}
		rs.rules = append(rs.rules, rule{path: d, access: (fsFile &^ unix.LANDLOCK_ACCESS_FS_EXECUTE) | unix.LANDLOCK_ACCESS_FS_READ_DIR})
	}
	return rs
}

// Rules returns how many path rules the ruleset has.
func (rs Ruleset) Rules() int { return len(rs.rules) }

// Rule is a path rule as the kernel takes it: the access already reduced to
// what the ruleset handles and, on a non-directory, to the file rights.
type Rule struct {
	Path   string
	Access uint64
}

// Beneath returns the path rules on dir and on paths beneath it, in the
// ruleset's order. A runner that mounts another filesystem over dir (a
// transaction's overlay) adds them again on the paths it mounted: a rule
// binds to an inode, the overlay's are not the host's, and Landlock skips
// the rules of a covered mount point.
func (rs Ruleset) Beneath(dir string) []Rule {
	var out []Rule
	for _, r := range rs.rules {
		if !modes.Within(r.path, dir) {
			continue
		}
		isDir := r.kind == kindDir
		if r.kind == kindUnknown {
			st, err := os.Lstat(r.path)
			if err != nil {
				continue // Build skips it too
			}
			isDir = st.IsDir()
		}
		access := r.access & rs.handledFS
		if !isDir {
			access &= fsFile
		}
		if access != 0 {
			out = append(out, Rule{Path: r.path, Access: access})
		}
	}
	return out
}

// WritableDir is the rule a runner adds on a directory it mounted for the
// command to write (a toolchain cache's overlay, see modes.Policy.Caches):
// what a writable root gets, on the overlay's inodes.
func (rs Ruleset) WritableDir(dir string) Rule {
	return Rule{Path: dir, Access: (fsRead | fsWrite) & rs.handledFS}
}

// MaskedPaths returns the deny-read paths the ruleset leaves out of every
// read right (Masked of its policy, as it was when the ruleset was derived).
func (rs Ruleset) MaskedPaths() []string { return rs.masked }

// ExistingDenyRead returns the policy's deny-read paths that existed (by
// stat) when the ruleset was derived, in the policy's order, whether in a
// writable root or not: what a mount view hides. A Cache checks at each
// use that each still exists or not as it did.
func (rs Ruleset) ExistingDenyRead() []string { return rs.existing }

// Features returns what the ruleset's ABI covers.
func (rs Ruleset) Features() Features { return rs.features }

// Build creates the ruleset in the kernel and returns its fd, ready for
// landlock_restrict_self(2) in the runner. Rules bind to the inodes opened
// here; the runner's mount view binds paths onto themselves, so they stay the
// same inodes. Any failure is returned; nothing is silently skipped except
// rule paths that do not exist (e.g. /dev/pts in a minimal container).
func (rs Ruleset) Build() (*os.File, error) { return rs.build(nil) }

// build is Build, the identity of each rule's path kept in rec (nil: not
// kept), but for the listed ones (rule.listed), which their directory's
// record vouches for.
func (rs Ruleset) build(rec *reads) (*os.File, error) {
	if rs.features.ABI < 1 {
		return nil, ErrUnavailable
	}
	attr := rulesetAttr{handledAccessFS: rs.handledFS, handledAccessNet: rs.handledNet, scoped: rs.scoped}
	fd, err := createRuleset(&attr, rulesetAttrSize(rs.features.ABI))
	if err != nil {
		return nil, fmt.Errorf("landlock_create_ruleset: %w", err)
	}
	f := os.NewFile(uintptr(fd), "landlock-ruleset")
	for _, r := range rs.rules {
		keep := rec
		if r.listed {
			keep = nil
		}
		if err := addPathRule(fd, r, rs.handledFS, keep); err != nil {
			f.Close()
			return nil, err
		}
	}
	for _, port := range rs.netPorts {
		if err := addNetPort(fd, &netPortAttr{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}); err != nil {
			f.Close()
			return nil, fmt.Errorf("landlock rule tcp port %d: %w", port, err)
		}
	}
	return f, nil
}

func addPathRule(rulesetFD int, r rule, handled uint64, rec *reads) error {
	flags := unix.O_PATH | unix.O_CLOEXEC
	if r.strict {
		flags |= unix.O_DIRECTORY | unix.O_NOFOLLOW
	}
	pfd, err := unix.Open(r.path, flags, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) && !r.strict {
			rec.absent(r.path)
			return nil
		}
		return fmt.Errorf("landlock rule %s: %w", r.path, err)
	}
	defer unix.Close(pfd)
	isDir := r.kind == kindDir
	if r.kind == kindUnknown || rec != nil {
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			return fmt.Errorf("landlock rule %s: %w", r.path, err)
		}
		rec.inode(r.path, !r.strict, &st)
		isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	access := r.access & handled
	if !isDir {
		access &= fsFile // only file rights are valid on a non-directory
	}
	if access == 0 {
		return nil
	}
	err = addPathBeneath(rulesetFD, &unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(pfd)})
	if errors.Is(err, unix.EINVAL) && r.kind == kindDir && !r.strict {
		// Listed as a directory, replaced by a file since: look.
		return addPathRule(rulesetFD, rule{path: r.path, access: r.access}, handled, rec)
	}
	if err != nil {
		return fmt.Errorf("landlock rule %s: %w", r.path, err)
	}
	return nil
}
