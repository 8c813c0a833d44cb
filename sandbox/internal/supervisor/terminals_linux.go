//go:build linux

package supervisor

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/proc"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/resolve"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// hostDevpts is the set of devpts instances mounted on the host (by device
// number), read once per sandbox when a /dev/pts path is first judged.
type hostDevpts struct {
	once sync.Once
	devs map[uint64]bool
}

func (h *hostDevpts) has(dev uint64) bool {
	h.once.Do(func() { h.devs = devptsInstances() })
	return h.devs[dev]
}

// otherTerminal reports whether canonical path p, seen through the target's
// root, is a pty of one of the host's devpts instances: another terminal, not
// one the command created (with a mount view, /dev/pts is the sandbox's own
// instance). The command's own terminal reaches it as fds 0-2 and needs no
// open by path. Landlock denies these opens too; this adds the fact.
func (n *Notifier) otherTerminal(t *resolve.Target, p string) bool {
	if !modes.Within(p, "/dev/pts") || p == "/dev/pts/ptmx" {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstatat(t.RootFD, resolve.Rel(p), &st, 0); err != nil {
		return false // the kernel decides (and Landlock denies)
	}
	return n.hostPts.has(uint64(st.Dev))
}

// devptsInstances returns the device numbers of the devpts mounts of this
// (the supervisor's) mount namespace.
func devptsInstances() map[uint64]bool {
	out := map[uint64]bool{}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, x := range fields {
			if x != "-" || i+1 >= len(fields) || fields[i+1] != "devpts" || len(fields) < 3 {
				continue
			}
			maj, min, ok := strings.Cut(fields[2], ":")
			a, err1 := strconv.ParseUint(maj, 10, 32)
			b, err2 := strconv.ParseUint(min, 10, 32)
			if ok && err1 == nil && err2 == nil {
				out[unix.Mkdev(uint32(a), uint32(b))] = true
			}
			break
		}
	}
	return out
}

// noTerminal reports whether an open of /dev/tty by the notified process
// would fail with ENXIO: the path is the tty device in the target's root
// and the process has no controlling terminal (field tty_nr of its stat;
// read while the process waits in the call, so the pid is still its own).
func noTerminal(t *resolve.Target, req *seccomp.Notif) bool {
	var st unix.Stat_t
	if unix.Fstatat(t.RootFD, "dev/tty", &st, 0) != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(5, 0) {
		return false
	}
	info, ok := proc.ReadStat(int(req.Pid))
	return ok && info.TTY == 0
}
