//go:build linux

package supervisor

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/resolve"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// Signals. Landlock scopes them from ABI 6 (LANDLOCK_SCOPE_SIGNAL) and a
// pid namespace confines the pids a command can name; on a host with
// neither (no user namespaces and a kernel before 6.12: Ubuntu 24.04's
// AppArmor restriction, Debian 12 in a container) a command could signal
// every process of its user — the harness, an editor, an ssh-agent. There
// the filter routes kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo
// and pidfd_send_signal to the supervisor, which lets a signal through only
// to the sandbox's own processes (descendants of the relay, inSandbox) and
// denies the rest with EPERM, as Landlock's scope would.
//
// The target is judged from the call's register arguments, which the
// command cannot change after the supervisor read them; what remains is
// the race sched_linux.go documents too: a sandbox process that exits
// between the check and the kernel's delivery, its pid reused by a host
// process meanwhile. pidfd_send_signal names its target by descriptor,
// which the command could swap after the check: the supervisor sends that
// one itself, through its own copy of the pidfd — or, without pidfd_getfd,
// through a pidfd of its own for the process the command's refers to
// (pidfdSignalByInfo, replace_linux.go).

// signalable reports whether the command may signal task id: one of the
// sandbox's processes, but not the runner's keeper (SetKeeper), which must
// outlive whatever the command does to keep its tree (the relay itself is
// never inSandbox). From Landlock ABI 6 the runner puts the command in a
// domain nested in theirs, whose signal scope keeps them out of reach the
// same way.
func (n *Notifier) signalable(id int) bool {
	return n.inSandbox(id) && (n.keeper <= 0 || resolve.Tgid(id) != n.keeper)
}

// SetKeeper names the runner's inner keeper (without a pid namespace): the
// command may not signal it.
func (n *Notifier) SetKeeper(pid int) { n.keeper = pid }

func (n *Notifier) signalVerdict(req *seccomp.Notif, rule seccomp.Rule) verdict {
	a := req.Args
	tid := int(req.Pid)
	if !sharesNS(tid, "pid") {
		return allow() // pids reach only the namespace's tasks
	}
	if rule.Name == "pidfd_send_signal" {
		return n.pidfdSignal(req, rule)
	}
	who := int(int32(a[rule.PidArg]))
	switch {
	case who == 0:
		return allow() // kill(0, sig): the caller's own process group
	case who == -1 && rule.Name == "kill":
		// Every process the caller may signal: the host's too.
		return n.deny(rule, unix.EPERM, "", "every process")
	case who < 0 && rule.Name == "kill":
		pg := -who
		// A process group lives in one session; one led by a process of
		// the sandbox holds only the sandbox's (the command runs in a
		// session of its own, which no host process can join).
		if n.inSandbox(pg) {
			if g, ok := procPgrp(pg); ok && g == pg {
				return allow()
			}
		}
		return n.deny(rule, unix.EPERM, "", "pgrp "+strconv.Itoa(pg))
	case who < 0:
		return allow() // EINVAL from the kernel
	case who == tid || who == resolve.Tgid(tid):
		return allow() // the caller itself (raise, abort, a runtime's preemption)
	case n.signalable(who):
		return allow()
	}
	return n.deny(rule, unix.EPERM, "", "pid "+strconv.Itoa(who))
}

// pidfdSignal performs pidfd_send_signal(fd, sig, NULL, flags) for the
// command when fd is a pidfd of one of the sandbox's processes.
func (n *Notifier) pidfdSignal(req *seccomp.Notif, rule seccomp.Rule) verdict {
	a := req.Args
	if a[2] != 0 {
		// A siginfo from the command's memory: not forwarded.
		return n.deny(rule, unix.EPERM, "", "siginfo")
	}
	if n.nocopy {
		return n.pidfdSignalByInfo(req, rule)
	}
	fd, v, ok := targetFD(int(req.Pid), int(int32(a[0])), n.pending(req))
	if !ok {
		return v
	}
	defer unix.Close(fd)
	pid, ok := pidfdPid(fd)
	if !ok {
		// Not a pidfd (a /proc/PID directory also works as one): no
		// target the supervisor can vouch for.
		return n.deny(rule, unix.EPERM, "", "fd "+strconv.Itoa(int(int32(a[0]))))
	}
	if pid <= 0 || !n.signalable(pid) {
		return n.deny(rule, unix.EPERM, "", "pid "+strconv.Itoa(pid))
	}
	_, _, e := unix.Syscall6(unix.SYS_PIDFD_SEND_SIGNAL, uintptr(fd), uintptr(int32(a[1])), 0, uintptr(uint32(a[3])), 0, 0)
	if e != 0 {
		return verdict{errno: e}
	}
	return verdict{}
}

// pidfdPid returns the pid (in the supervisor's pid namespace) of the
// process pidfd fd refers to, from its fdinfo; false when fd is no pidfd
// or the process is gone (Pid: -1).
func pidfdPid(fd int) (int, bool) {
	if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err != nil || link != "anon_inode:[pidfd]" {
		return 0, false
	}
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Pid:"); ok {
			p, err := strconv.Atoi(strings.TrimSpace(rest))
			return p, err == nil
		}
	}
	return 0, false
}
