//go:build linux

package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// buildMountView makes, inside a private mount namespace, every mount
// read-only except the writable roots; binds the protected paths read-only
// on top (after pinning their ancestors inside the roots as mount points, so
// they cannot be renamed away); and mounts a fresh /proc when the runner is
// in a new pid namespace. Paths keep their meaning: nothing moves, so the
// supervisor and the command agree on every path.
func buildMountView(p modes.Policy, pidNS bool) (freshProc bool, err error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return false, fmt.Errorf("mount view: make / private: %w", err)
	}
	for _, w := range p.WritableRoots {
		if err := unix.Mount(w, w, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return false, fmt.Errorf("mount view: bind writable root %s: %w", w, err)
		}
	}
	for _, pp := range p.Protected {
		if _, err := os.Lstat(pp); err != nil {
			continue // a missing protected path is guarded by the supervisor only
		}
		root := rootOf(p.WritableRoots, pp)
		for _, a := range ancestorsBetween(root, pp) {
			if err := unix.Mount(a, a, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return false, fmt.Errorf("mount view: pin %s: %w", a, err)
			}
		}
		if err := unix.Mount(pp, pp, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return false, fmt.Errorf("mount view: bind protected %s: %w", pp, err)
		}
		if err := remountReadOnly(pp); err != nil {
			return false, fmt.Errorf("mount view: protect %s: %w", pp, err)
		}
	}
	points, err := mountPoints()
	if err != nil {
		return false, fmt.Errorf("mount view: %w", err)
	}
	for _, m := range points {
		if modes.Within(m, "/proc") || p.Protects(m) {
			continue
		}
		if rootOf(p.WritableRoots, m) != "" {
			continue
		}
		if err := remountReadOnly(m); err != nil {
			if errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				continue // unreachable for this uid, so unreachable for the command too
			}
			return false, fmt.Errorf("mount view: read-only %s: %w", m, err)
		}
	}
	if pidNS {
		freshProc = unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "") == nil
	}
	if err := checkMountView(p); err != nil {
		return false, err
	}
	return freshProc, nil
}

// checkMountView self-tests the view: / must be read-only (unless it is a
// writable root) and each protected path that exists must be read-only.
func checkMountView(p modes.Policy) error {
	if rootOf(p.WritableRoots, "/") == "" {
		if !readOnlyMount("/") {
			return errors.New("mount view self-test: / is still writable")
		}
	}
	for _, pp := range p.Protected {
		if _, err := os.Lstat(pp); err == nil && !readOnlyMount(pp) {
			return fmt.Errorf("mount view self-test: protected %s is still writable", pp)
		}
	}
	return nil
}

func readOnlyMount(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Flags&unix.ST_RDONLY != 0
}

// remountReadOnly remounts the topmost mount at path read-only, keeping the
// flags a user namespace is not allowed to clear.
func remountReadOnly(path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY)
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	err := unix.Mount("", path, "", flags, "")
	if err != nil && readOnlyMount(path) {
		return nil
	}
	return err
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
