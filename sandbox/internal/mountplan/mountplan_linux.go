//go:build linux

package mountplan

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/landlock"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Plan returns the runner's mount-view steps for p as spec tokens, in
// order. Inside the runner's private mount namespace they make every mount
// read-only and nodev except the writable roots (nodev too); bind the
// protected paths read-only on top, after pinning their ancestors inside the
// roots as mount points (a mount point cannot be renamed or removed, so they
// cannot be moved away and rebuilt); keep only the device sinks, the random
// devices and /dev/tty openable; mount a fresh devpts instance on /dev/pts
// (the command's own ptys, none of the host's) with its ptmx bound over
// /dev/ptmx; mount a fresh /proc when the runner is in a new pid namespace;
// and bind every global /proc entry (sys, sysrq-trigger, irq, ...) read-only
// over itself, so only the per-process files stay writable. Paths keep their
// meaning: nothing moves, so the supervisor and the command agree on every
// path. Each step restricts or is neutral, so a view that fails half-way is
// never looser than none.
//
// ll, when not zero, is the Landlock access the runner grants on the
// filesystems it mounts, before restricting itself: the supervisor's ruleset
// cannot name a superblock that does not exist yet (the host's devpts gets
// none; Landlock ignores the rules of covered mount points).
//
// masks are the deny-read paths to hide: Masks(p), which the caller
// computed once for the command (its report names the same paths).
//
// The plan is computed here, in the supervisor, from its own mount table:
// the runner's new mount namespace starts as a copy of it.
//
// ov, when not nil, is a transaction's overlay: mounted first, over its root,
// so that every later step acts on what the command sees.
//
// caches are the toolchain caches' overlays (modes.Policy.Caches), mounted
// next, each with its Landlock rules. One that cannot be mounted is left
// out, with its rules (the runner says which were mounted): the cache
// stays read-only.
//
// creds, when not nil, are the sanitized copies of credential files to
// show in place of masks (modes.Policy.CredentialFiles).
func Plan(p modes.Policy, ll landlock.MountAccess, masks []string, creds *Credentials, ov *Overlay, caches []Overlay) ([]string, error) {
	var t []string
	mount := func(src, tgt, fstype string, flags uintptr, mode string) {
		t = append(t, "m", src, tgt, fstype, strconv.FormatUint(uint64(flags), 10), mode)
	}
	mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "hard")
	var checks []string
	if ov != nil {
		data, err := ov.options()
		if err != nil {
			return nil, err
		}
		for _, l := range []struct {
			fd   int
			path string
		}{{ov.UpperFD, ov.Upper}, {ov.WorkFD, ov.Work}} {
			if l.fd > 0 {
				t = append(t, "same", strconv.Itoa(l.fd), l.path)
			}
		}
		t = append(t, "md", "overlay", ov.Root, "overlay", strconv.FormatUint(unix.MS_NOSUID|unix.MS_NODEV, 10), "hard", data)
		for _, r := range ov.Rules {
			t = append(t, "l", r.Path, strconv.FormatUint(r.Access, 10))
		}
		// The transaction's directory is the command's own writes: hidden,
		// so that nothing reaches the upper layer but through the overlay
		// (it may lie in a writable root, /tmp say).
		t = append(t, "md", "tmpfs", ov.Dir, "tmpfs", strconv.FormatUint(maskFlags, 10), "hard", "mode=0700,size=4k,nr_inodes=16")
		checks = append(checks, ov.Dir)
	}
	for _, c := range caches {
		if c.BindUpper {
			flags, err := keptFlags(c.Upper)
			if err != nil {
				return nil, fmt.Errorf("mount view: %s: %w", c.Upper, err)
			}
			mount(c.Upper, c.Root, "", unix.MS_BIND, "cache")
			mount("", c.Root, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOSUID|unix.MS_NODEV|flags, "cacheflags")
		} else {
			data, err := c.options()
			if err != nil {
				return nil, err
			}
			t = append(t, "md", "overlay", c.Root, "overlay", strconv.FormatUint(unix.MS_NOSUID|unix.MS_NODEV, 10), "cache", data)
		}
		for _, r := range c.Rules {
			t = append(t, "l", r.Path, strconv.FormatUint(r.Access, 10))
		}
	}
	for _, w := range p.WritableRoots {
		flags, err := keptFlags(w)
		if err != nil {
			return nil, fmt.Errorf("mount view: %s: %w", w, err)
		}
		mount(w, w, "", unix.MS_BIND|unix.MS_REC, "hard")
		// A device node in a writable root (planted by root on the host)
		// is not one of the sinks: nodev.
		mount("", w, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NODEV|flags|rdonlyFlag(w), "hard")
	}
	for _, pp := range p.Protected {
		if _, err := os.Stat(pp); err != nil {
			// A missing protected path (or a dangling link) is guarded by
			// the supervisor only.
			continue
		}
		for _, a := range ancestorsBetween(RootOf(p.WritableRoots, pp), pp) {
			mount(a, a, "", unix.MS_BIND|unix.MS_REC, "hard")
		}
		flags, err := keptFlags(pp)
		if err != nil {
			return nil, fmt.Errorf("mount view: %s: %w", pp, err)
		}
		mount(pp, pp, "", unix.MS_BIND|unix.MS_REC, "hard")
		mount("", pp, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NODEV|flags, "hard")
		checks = append(checks, pp)
	}
	// Each existing deny-read path is hidden, on top of the roots and the
	// protected paths: a directory by an empty read-only tmpfs, anything
	// else by a read-only nodev bind of /dev/null, which cannot be opened
	// (like bwrap's --tmpfs and --ro-bind /dev/null). Nothing is created on
	// the host; a mount point cannot be removed or renamed.
	nullFlags, err := keptFlags("/dev/null")
	if err != nil {
		return nil, fmt.Errorf("mount view: /dev/null: %w", err)
	}
	var credFlags uintptr
	if creds != nil {
		if credFlags, err = keptFlags(creds.Dir); err != nil {
			return nil, fmt.Errorf("mount view: %s: %w", creds.Dir, err)
		}
	}
	for _, m := range masks {
		st, err := os.Stat(m)
		if err != nil {
			continue
		}
		if c, ok := creds.Copy(m); ok && st.Mode().IsRegular() {
			// A credential file shows its sanitized copy, read-only
			// (EROFS on a write), readable where the ruleset grants
			// the original nothing.
			mount(c, m, "", unix.MS_BIND, "hard")
			mount("", m, "", unix.MS_REMOUNT|unix.MS_BIND|maskFlags|credFlags, "hard")
			if r := ll.Read & unix.LANDLOCK_ACCESS_FS_READ_FILE; r != 0 {
				t = append(t, "l", m, strconv.FormatUint(r, 10))
			}
			checks = append(checks, m)
			continue
		}
		if st.IsDir() {
			t = append(t, "md", "tmpfs", m, "tmpfs", strconv.FormatUint(maskFlags, 10), "hard", "mode=0700,size=4k,nr_inodes=16")
		} else {
			mount("/dev/null", m, "", unix.MS_BIND, "hard")
			mount("", m, "", unix.MS_REMOUNT|unix.MS_BIND|maskFlags|nullFlags, "hard")
		}
		checks = append(checks, m)
	}
	if creds != nil {
		// The copies' directory is the supervisor's: hidden, so that the
		// command reaches a copy only where it replaces its original.
		t = append(t, "md", "tmpfs", creds.Dir, "tmpfs", strconv.FormatUint(maskFlags, 10), "hard", "mode=0700,size=4k,nr_inodes=16")
		checks = append(checks, creds.Dir)
	}
	// The devices that stay openable are bound onto themselves before
	// their mounts become nodev (a bind is a mount of its own), read-only
	// so that their metadata cannot change.
	devices := map[string]bool{}
	for _, d := range openableDevices() {
		flags, err := keptFlags(d)
		if err != nil {
			continue
		}
		devices[d] = true
		mount(d, d, "", unix.MS_BIND, "hard")
		mount("", d, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|flags, "hard")
	}
	points, err := mountPoints()
	if err != nil {
		return nil, fmt.Errorf("mount view: %w", err)
	}
	for _, m := range points {
		if m == "/proc" || devices[m] || p.Protects(m) || p.Masks(m) {
			continue
		}
		flags, err := keptFlags(m)
		if err != nil {
			continue // unreachable for this uid, so unreachable for the command too
		}
		if RootOf(p.WritableRoots, m) != "" {
			if !isWritableRoot(p, m) {
				mount("", m, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NODEV|flags|rdonlyFlag(m), "skip")
			}
			continue
		}
		t = append(t, "r", m, strconv.FormatUint(uint64(flags|unix.MS_NODEV), 10))
	}
	// The host's devpts (now nodev) is covered by a fresh instance: the
	// command sees its own ptys only. Its ptmx replaces /dev/ptmx.
	if st, err := os.Stat("/dev/pts"); err == nil && st.IsDir() {
		t = append(t, "md", "devpts", "/dev/pts", "devpts", strconv.FormatUint(unix.MS_NOSUID|unix.MS_NOEXEC, 10), "hard",
			"newinstance,ptmxmode=0666,mode=0620")
		ptmx := false
		if st, err := os.Lstat("/dev/ptmx"); err == nil && st.Mode()&os.ModeSymlink == 0 {
			mount("/dev/pts/ptmx", "/dev/ptmx", "", unix.MS_BIND, "hard")
			ptmx = true
		}
		// Landlock ignores the rules of covered mount points, so the
		// host's /dev/ptmx rule does not reach the bind: both get one.
		if ll.Pty != 0 {
			t = append(t, "l", "/dev/pts", strconv.FormatUint(ll.Pty, 10))
			if ptmx {
				t = append(t, "l", "/dev/ptmx", strconv.FormatUint(ll.Pty&^unix.LANDLOCK_ACCESS_FS_READ_DIR, 10))
			}
		}
	}
	// Mounted only when the runner got a pid namespace; a new superblock,
	// so the supervisor's Landlock rule on the host's /proc does not
	// reach it.
	mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "proc")
	if ll.Read != 0 {
		t = append(t, "l", "/proc", strconv.FormatUint(ll.Read, 10))
	}
	procFlags, err := keptFlags("/proc")
	if err != nil {
		return nil, fmt.Errorf("mount view: /proc: %w", err)
	}
	if globals := procGlobals(); len(globals) > 0 {
		// A bind takes its mount's flags: with the instance read-only,
		// each global entry is one bind, read-only, instead of a bind and
		// a remount (49 fewer mounts for root); then the instance, and so
		// /proc/PID, is made writable again — unless the host's /proc is
		// read-only (without a pid namespace it is the one remounted, and
		// its lock would refuse). The checks below verify each.
		remount := unix.MS_REMOUNT | unix.MS_BIND | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | procFlags
		mount("", "/proc", "", remount|unix.MS_RDONLY, "hard")
		for _, g := range globals {
			mount(g, g, "", unix.MS_BIND|unix.MS_REC, "hard")
			checks = append(checks, g)
		}
		mount("", "/proc", "", remount|rdonlyFlag("/proc"), "hard")
	}
	if RootOf(p.WritableRoots, "/") == "" {
		checks = append(checks, "/")
	}
	for _, c := range checks {
		t = append(t, "ro", c)
	}
	return t, nil
}

// Overlay is a transaction's overlay (see sandbox/transaction) or a
// toolchain cache's (Dir, WorkFD and UpperFD unset): Root, a writable root
// or a cache, is both its lower layer and where it is mounted; the
// command's writes there land in Upper. Rules are the Landlock rules on Root
// and beneath it (landlock.Ruleset.Beneath), added again on the overlay's
// inodes; Dir, the transaction's directory (Upper and Work lie in it), is
// hidden from the command. UpperFD and WorkFD, when set, are the runner's
// descriptors of the layers the supervisor checked: the runner mounts
// those directories (the inodes at Upper and Work, reached without a
// symlink, must still be them), not whatever the paths name.
type Overlay struct {
	Root, Upper, Work, Dir string
	UpperFD, WorkFD        int
	Rules                  []landlock.Rule
	// Volatile adds overlayfs's "volatile" (a toolchain cache's, see
	// sandbox/internal/cachestore): the overlay never syncs its upper
	// filesystem, not even when it goes.
	Volatile bool
	// BindUpper (a toolchain cache's, whose Root was empty): Upper is
	// bound at Root (nosuid, nodev) instead of an overlay. With nothing
	// below to show or to keep, the command writes to the same directory
	// as through an overlay, at a bind's cost: each overlay mount checks
	// its work directory (about 0.7 ms here, 9 caches a command).
	BindUpper bool
}

// options returns the overlay's mount data. userxattr lets a user namespace
// mount it (Linux 5.11) and keeps its metadata in user.overlay.* xattrs,
// the same whoever mounts it; redirect_dir and metacopy stay off with it,
// so the upper layer is plain files, whiteouts and opaque directories.
func (o *Overlay) options() (string, error) {
	for _, p := range []string{o.Root, o.Upper, o.Work} {
		if !filepath.IsAbs(p) || strings.ContainsAny(p, ",:\\\n") {
			return "", fmt.Errorf("mount view: overlay: %q cannot be an overlay layer (it must be absolute, without ',', ':', '\\' or a newline)", p)
		}
	}
	upper, work := o.Upper, o.Work
	if o.UpperFD > 0 {
		upper = "/proc/self/fd/" + strconv.Itoa(o.UpperFD)
	}
	if o.WorkFD > 0 {
		work = "/proc/self/fd/" + strconv.Itoa(o.WorkFD)
	}
	data := "lowerdir=" + o.Root + ",upperdir=" + upper + ",workdir=" + work + ",userxattr"
	if o.Volatile {
		data += ",volatile"
	}
	return data, nil
}

// Credentials are the sanitized copies of credential files
// (sandbox/internal/credfiles) the supervisor made for one command.
type Credentials struct {
	Dir    string            // the supervisor's private directory that holds them
	Copies map[string]string // by the credential file each replaces
}

// Copy returns the copy shown in place of credential file m.
func (c *Credentials) Copy(m string) (string, bool) {
	if c == nil {
		return "", false
	}
	p, ok := c.Copies[m]
	return p, ok
}

// maskFlags are the mount flags of a mask.
const maskFlags = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC

// Masks returns the deny-read paths of p that the mount view hides: those
// that exist.
func Masks(p modes.Policy) []string {
	if !p.Mode.Confines() {
		return nil
	}
	var out []string
	for _, d := range p.DenyRead {
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

func isWritableRoot(p modes.Policy, m string) bool {
	for _, w := range p.WritableRoots {
		if w == m {
			return true
		}
	}
	return false
}

// openableDevices are the device nodes the mount view keeps openable: the
// sinks, the random devices and /dev/tty (the controlling terminal, which the
// command, in a new session, has only if it makes one of its own ptys one).
// Every other device node, the host's terminals, consoles and input devices
// included, lies on a nodev mount.
func openableDevices() []string {
	return append(append([]string{}, modes.DeviceSinks()...), "/dev/random", "/dev/urandom", "/dev/tty")
}

// procGlobals lists the entries of /proc that are not per-process, at its
// top level (not the pid directories, nor the self, thread-self and net
// links): the kernel's global state (sysctls, sysrq-trigger, irq affinities,
// bus and driver settings). The mount view binds each read-only; only
// /proc/PID (and so /proc/self) stays writable where DAC allows. For root
// that is every entry: root owns them, and a chmod of a proc entry changes it
// for every procfs instance, the host's included (chmod 0222
// /proc/sysrq-trigger would let any host user reboot the machine). Other
// callers own none, so the directories and the files with a write bit do.
//
// The kernel lists /proc's global entries first, then self, thread-self and
// the pid directories (proc_root_readdir): the listing is read up to the
// first of those, so that its cost does not grow with the host's processes
// (os.ReadDir of /proc took 37 µs with 126 entries and 804 µs with 1,627,
// measured here; the first 4 KiB of it 17-18 µs either way).
// TestProcGlobalsAll holds the order to a whole listing on every kernel the
// tests run on.
func procGlobals() []string {
	fd, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	root := os.Geteuid() == 0
	var out []string
	buf := make([]byte, 4096)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil || n <= 0 {
			break
		}
		for b := buf[:n]; len(b) > direntName; {
			reclen := int(binary.NativeEndian.Uint16(b[direntReclen:]))
			if reclen <= direntName || reclen > len(b) {
				break
			}
			typ, name := b[direntType], b[direntName:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			e := string(name)
			switch {
			case e == "." || e == "..":
				continue
			case isPID(e) || e == "self" || e == "thread-self":
				// The global entries are all listed.
				sort.Strings(out)
				return out
			}
			var st unix.Stat_t
			if typ == unix.DT_UNKNOWN || (!root && typ != unix.DT_DIR) {
				if unix.Fstatat(fd, e, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
					continue
				}
				typ = direntTypeOf(st.Mode)
			}
			if typ == unix.DT_LNK || (!root && typ != unix.DT_DIR && st.Mode&0o222 == 0) {
				continue
			}
			out = append(out, "/proc/"+e)
		}
	}
	sort.Strings(out)
	return out
}

// direntTypeOf is the d_type of a file of mode m, as far as procGlobals
// tells them apart.
func direntTypeOf(m uint32) uint8 {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFLNK:
		return unix.DT_LNK
	}
	return unix.DT_REG
}

// The offsets in a linux_dirent64: d_ino (8 bytes), d_off (8), d_reclen
// (2), d_type (1), d_name.
const (
	direntReclen = 16
	direntType   = 18
	direntName   = 19
)

// ProcGlobal reports whether canonical path p lies in a global /proc entry
// (see procGlobals): anything under /proc but /proc itself and /proc/PID.
func ProcGlobal(p string) bool {
	rest, ok := strings.CutPrefix(p, "/proc/")
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(rest, "/")
	return first != "" && !isPID(first)
}

func isPID(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// rdonlyFlag returns MS_RDONLY when path lies on a read-only mount (a
// remount that must not make it writable keeps it).
func rdonlyFlag(path string) uintptr {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) == nil && st.Flags&unix.ST_RDONLY != 0 {
		return unix.MS_RDONLY
	}
	return 0
}

// keptFlags returns the mount flags of path that a remount must keep (a user
// namespace may not clear them).
func keptFlags(path string) (uintptr, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	var flags uintptr
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	return flags, nil
}

// mountPoints lists the distinct mount points of this mount namespace,
// shortest first.
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if !seen[mp] {
			seen[mp] = true
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) < len(out[j]) })
	return out, nil
}

// unescapeMountPath decodes the octal escapes (\040 etc.) of mountinfo.
func unescapeMountPath(s string) string { return landlock.UnescapeMountPath(s) }

// RootOf returns the writable root containing path, or "".
func RootOf(roots []string, path string) string {
	for _, r := range roots {
		if modes.Within(path, r) {
			return r
		}
	}
	return ""
}

// ancestorsBetween lists the directories strictly between root and path,
// outermost first. With no root, it returns nothing.
func ancestorsBetween(root, path string) []string {
	if root == "" {
		return nil
	}
	var out []string
	for d := filepath.Dir(path); d != root && modes.Within(d, root); d = filepath.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}
