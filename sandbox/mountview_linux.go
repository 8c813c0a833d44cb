//go:build linux

package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// mountPlan returns the runner's mount-view steps for p as spec tokens, in
// order. Inside the runner's private mount namespace they make every mount
// read-only except the writable roots; bind the protected paths read-only on
// top, after pinning their ancestors inside the roots as mount points (a
// mount point cannot be renamed or removed, so they cannot be moved away and
// rebuilt); and mount a fresh /proc when the runner is in a new pid
// namespace. Paths keep their meaning: nothing moves, so the supervisor and
// the command agree on every path. Each step restricts or is neutral, so a
// view that fails half-way is never looser than none.
//
// The plan is computed here, in the supervisor, from its own mount table:
// the runner's new mount namespace starts as a copy of it.
func mountPlan(p modes.Policy) ([]string, error) {
	var t []string
	mount := func(src, tgt, fstype string, flags uintptr, mode string) {
		t = append(t, "m", src, tgt, fstype, strconv.FormatUint(uint64(flags), 10), mode)
	}
	mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "hard")
	for _, w := range p.WritableRoots {
		mount(w, w, "", unix.MS_BIND|unix.MS_REC, "hard")
	}
	var checks []string
	for _, pp := range p.Protected {
		if _, err := os.Stat(pp); err != nil {
			// A missing protected path (or a dangling link) is guarded by
			// the supervisor only.
			continue
		}
		for _, a := range ancestorsBetween(rootOf(p.WritableRoots, pp), pp) {
			mount(a, a, "", unix.MS_BIND|unix.MS_REC, "hard")
		}
		flags, err := keptFlags(pp)
		if err != nil {
			return nil, fmt.Errorf("mount view: %s: %w", pp, err)
		}
		mount(pp, pp, "", unix.MS_BIND|unix.MS_REC, "hard")
		mount("", pp, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|flags, "hard")
		checks = append(checks, pp)
	}
	points, err := mountPoints()
	if err != nil {
		return nil, fmt.Errorf("mount view: %w", err)
	}
	for _, m := range points {
		if modes.Within(m, "/proc") || p.Protects(m) || rootOf(p.WritableRoots, m) != "" {
			continue
		}
		flags, err := keptFlags(m)
		if err != nil {
			continue // unreachable for this uid, so unreachable for the command too
		}
		t = append(t, "r", m, strconv.FormatUint(uint64(flags), 10))
	}
	// Mounted only when the runner got a pid namespace.
	mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "proc")
	if rootOf(p.WritableRoots, "/") == "" {
		checks = append(checks, "/")
	}
	for _, c := range checks {
		t = append(t, "ro", c)
	}
	return t, nil
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
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// rootOf returns the writable root containing path, or "".
func rootOf(roots []string, path string) string {
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
