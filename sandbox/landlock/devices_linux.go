//go:build linux

package landlock

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// hostPts is where the host's ptys live. The ruleset grants nothing there:
// reading another terminal's slave steals its keystrokes, writing to it
// injects output. The runner's mount view covers it with a fresh devpts
// instance, which the runner grants MountAccess.Pty on (mountplan.Plan's "l" step).
const hostPts = "/dev/pts"

var randomDevices = []string{"/dev/random", "/dev/urandom"}

// MountAccess is the access a runner grants on the filesystems its mount
// view creates: a fresh /proc (Read) and its own devpts instance, the ptys it
// creates through /dev/ptmx (Pty).
type MountAccess struct {
	Read, Pty uint64
}

// MountAccessOf returns the MountAccess for ABI v.
func MountAccessOf(v int) MountAccess {
	h := handledFS(v)
	return MountAccess{Read: fsRead & h,
		Pty: ((fsFile &^ unix.LANDLOCK_ACCESS_FS_EXECUTE) | unix.LANDLOCK_ACCESS_FS_READ_DIR) & h}
}

// fsRules grants reading and executing everywhere except on device nodes,
// and every right under the writable roots except on device nodes there.
// Directories are listable everywhere (a rule on / with READ_DIR); files are
// readable everywhere but under /dev and under any other mount of devtmpfs
// or devpts (a chroot's /dev, a container's bind of a pty). Those subtrees
// are left out by granting the siblings along the way to each of them
// instead (an allow-list cannot carve an exception); under /dev only the
// mounts of other filesystems (/dev/shm, /dev/mqueue, /dev/hugepages) are
// granted, and ForABI adds the device nodes a command needs. Reads of other
// terminals, consoles (/dev/tty*, /dev/vcs*, /dev/console), input devices
// and raw disks are so denied by the kernel.
//
// The masked paths (existing deny-read paths outside the writable roots,
// see Masked) are left out of the read rights the same way: every entry of
// every directory on the way from / down to each of them is granted, the
// way itself and the masked path are not. The way keeps only "/"'s READ_DIR:
// its directories stay listable (and so the names in a masked directory),
// but a file created in one of them after the ruleset was built (a new
// ~/.foo) is not readable. Masked files and everything beneath masked
// directories can be neither read nor executed.
//
// The carved paths (protected paths, see Options.CarveProtected) are left
// out of the writable roots the same way: every entry along the way to
// each of them is granted, the way itself and the carved path are not. A
// directory on the way keeps only the read rights of "/", so none of its
// entries can be created, removed, renamed or replaced, and a new file in
// it could not be written (its rights would come from that directory):
// this is what keeps a carved path that does not exist yet from being
// created, and one that exists from being replaced. The carved path and
// everything beneath it are read-only.
func fsRules(rec *reads, roots, carved, masked []string) []rule {
	out := []rule{{path: "/", access: unix.LANDLOCK_ACCESS_FS_READ_DIR, kind: kindDir}}
	devMounts, others := deviceMounts(rec)
	excluded := append([]string{"/dev"}, devMounts...)
	grantBeneath(rec, "/", kindDir, append(append([]string(nil), excluded...), masked...), fsRead, &out)
	for _, m := range others {
		out = append(out, rule{path: m, access: fsRead})
	}
	for _, r := range roots {
		var ex []string
		for _, c := range carved {
			if c != r && modes.Within(c, r) {
				ex = append(ex, c)
			}
		}
		grantBeneath(rec, r, kindUnknown, append(ex, excluded...), fsRead|fsWrite, &out)
	}
	return out
}

// grantBeneath adds rules granting access on dir (of kind k) minus the
// excluded subtrees strictly beneath it. What it lists is kept in rec (nil:
// not kept).
func grantBeneath(rec *reads, dir string, k kind, excluded []string, access uint64, out *[]rule) {
	grantBeneathAs(rec, dir, k, false, excluded, access, out)
}

// grantBeneathAs is grantBeneath for a dir that is an entry of a directory
// it listed (listed).
func grantBeneathAs(rec *reads, dir string, k kind, listed bool, excluded []string, access uint64, out *[]rule) {
	split := false
	for _, x := range excluded {
		if x != dir && modes.Within(x, dir) {
			split = true
		}
	}
	if !split {
		*out = append(*out, rule{path: dir, access: access, kind: k, listed: listed})
		return
	}
	ents, err := rec.readDir(dir)
	if err != nil {
		return // nothing granted: fails closed
	}
	for _, e := range ents {
		if e.Type()&os.ModeSymlink != 0 {
			continue // its target is granted (or not) where it lies
		}
		child := filepath.Join(dir, e.Name())
		excl := false
		for _, x := range excluded {
			excl = excl || x == child
		}
		if !excl {
			ck := kindOther
			if e.IsDir() {
				ck = kindDir
			}
			grantBeneathAs(rec, child, ck, true, excluded, access, out)
		}
	}
}

// deviceMounts returns the mount points of devtmpfs and devpts outside /dev,
// and the mount points under /dev of other filesystems. rec (nil: none)
// keeps the mount table open, to learn of its next change.
func deviceMounts(rec *reads) (dev, others []string) {
	f, err := rec.openMounts()
	if err != nil {
		return nil, nil
	}
	if rec == nil {
		defer f.Close()
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		mp, fstype := UnescapeMountPath(fields[4]), fields[sep+1]
		isDev := fstype == "devtmpfs" || fstype == "devpts"
		switch {
		case modes.Within(mp, "/dev"):
			if !isDev && mp != "/dev" {
				others = append(others, mp)
			}
		case isDev:
			dev = append(dev, mp)
		}
	}
	return dev, others
}

// UnescapeMountPath decodes the octal escapes (\040 etc.) of a mountinfo path.
func UnescapeMountPath(s string) string {
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
