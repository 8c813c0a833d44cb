//go:build linux

package supervisor

import (
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/proc"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/resolve"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// setpriority, prlimit64, sched_setaffinity/setscheduler/setparam/setattr
// and ioprio_set act on another process of the same user with no check
// Landlock implements (its ptrace restriction covers process_vm_*, kcmp,
// migrate_pages, move_pages, process_madvise, get_robust_list, /proc/PID
// files; its signal scope kill, tgkill, rt_*sigqueueinfo,
// pidfd_send_signal). In a pid namespace the pid they name is the
// namespace's, so only the sandbox's processes can be reached; without one
// (a host without user namespaces) the supervisor checks that the process,
// process group or user named is the sandbox's. The filter routes only
// calls that do not name the caller itself.

const (
	prioProcess, prioPgrp         = 0, 1 // setpriority's which
	ioprioWhoProcess, ioprioWhoPg = 1, 2 // ioprio_set's which
)

func (n *Notifier) schedVerdict(req *seccomp.Notif, rule seccomp.Rule) verdict {
	a := req.Args
	tid := int(req.Pid)
	if !sharesNS(tid, "pid") {
		return allow() // pids (and PRIO_USER) reach only the namespace's tasks
	}
	who := int(int32(a[rule.PidArg]))
	kind := "pid"
	switch rule.Name {
	case "setpriority", "ioprio_set":
		process, pgrp, user := prioProcess, prioPgrp, seccomp.PrioUser
		if rule.Name == "ioprio_set" {
			process, pgrp, user = ioprioWhoProcess, ioprioWhoPg, seccomp.IoprioWhoUser
		}
		switch int(int32(a[0])) {
		case process:
		case pgrp:
			kind = "pgrp"
		case user:
			// Every process of a user: the host's too.
			return n.deny(rule, unix.EPERM, "", "user "+strconv.Itoa(who))
		default:
			return allow() // EINVAL from the kernel
		}
	}
	if who == 0 || who == tid {
		return allow() // the caller itself (its own group)
	}
	if who < 0 {
		return allow() // ESRCH/EINVAL from the kernel
	}
	if kind == "pgrp" {
		// A process group lives in one session; one led by a process of
		// the sandbox holds only the sandbox's (the command runs in a
		// session of its own, which no host process can join).
		if n.inSandbox(who) {
			if pg, ok := procPgrp(who); ok && pg == who {
				return allow()
			}
		}
		return n.deny(rule, unix.EPERM, "", "pgrp "+strconv.Itoa(who))
	}
	if n.inSandbox(who) {
		return allow()
	}
	return n.deny(rule, unix.EPERM, "", "pid "+strconv.Itoa(who))
}

// inSandbox reports whether task id (a pid or tid of the supervisor's pid
// namespace) is a descendant of the relay. Each step up the ancestry must
// lead to an older process, so a pid reused while we read cannot splice a
// host process into the tree; and the task must still be the one we looked
// at once the walk is done (a pidfd opened first says it has not exited).
func (n *Notifier) inSandbox(id int) bool {
	if n.relay <= 0 || id == n.relay {
		return false
	}
	first, ok := proc.ReadStat(id)
	if !ok {
		return false
	}
	fd, err := unix.PidfdOpen(resolve.Tgid(id), 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	cur := first
	for steps := 0; steps < 1<<16; steps++ {
		if cur.PPID == n.relay {
			relay, ok := proc.ReadStat(n.relay)
			if !ok || relay.Start != n.relayStart || relay.Start > cur.Start {
				return false
			}
			again, ok := proc.ReadStat(id)
			return ok && again.Start == first.Start && proc.Alive(fd)
		}
		if cur.PPID <= 1 {
			return false
		}
		parent, ok := proc.ReadStat(cur.PPID)
		if !ok || parent.Start > cur.Start {
			return false
		}
		cur = parent
	}
	return false
}

// procStart reads the start time of pid (clock ticks since boot) from
// /proc/pid/stat, with the error that prevented it (EMFILE is a resource
// error for Start).
func procStart(pid int) (uint64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 20 {
		return 0, unix.EINVAL
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// statFields returns the fields of /proc/pid/stat after "(comm)".
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, unix.EINVAL
	}
	return strings.Fields(string(b[i+1:])), nil
}

// procPgrp reads the process group of pid from /proc/pid/stat.
func procPgrp(pid int) (int, bool) {
	f, err := statFields(pid)
	if err != nil || len(f) < 3 {
		return 0, false
	}
	pg, err := strconv.Atoi(f[2])
	return pg, err == nil
}
