//go:build linux

// Command degrade simulates a degraded host for one program: it loads a
// seccomp filter (default allow), then execs PROGRAM.
//
//	degrade nolandlock PROGRAM [ARG...]  a kernel without Landlock: the three
//	                                     landlock_* calls fail with ENOSYS
//	degrade apparmor PROGRAM [ARG...]    Ubuntu 24.04's AppArmor restriction
//	                                     (kernel.apparmor_restrict_unprivileged_userns):
//	                                     unshare(CLONE_NEWUSER) succeeds, but
//	                                     the namespace holds no capability, so
//	                                     writing its uid_map fails with EPERM,
//	                                     and so do unshare of any other
//	                                     namespace, setns and mount. Simulated:
//	                                     unshare(CLONE_NEWUSER) alone returns 0
//	                                     without making a namespace (the
//	                                     caller's uid_map, already written,
//	                                     then refuses the write with EPERM, as
//	                                     on 24.04); other namespaces, setns and
//	                                     mount fail with EPERM
//	degrade usernsonly PROGRAM [ARG...]  a nested sandbox: a user namespace can
//	                                     be created and mapped, but unshare of
//	                                     any other namespace, setns and mount
//	                                     fail with EPERM (unshare of CLONE_FS or
//	                                     CLONE_FILES still works)
//	degrade docker PROGRAM [ARG...]      Docker's default seccomp profile
//	                                     without CAP_SYS_PTRACE: unshare,
//	                                     setns and mount fail with EPERM (no
//	                                     user namespace, and no
//	                                     unshare(CLONE_FS) either), and so
//	                                     does pidfd_getfd (the supervisor
//	                                     cannot copy a command's descriptor;
//	                                     user notification works)
//	degrade nonotify PROGRAM [ARG...]    a kernel without seccomp user
//	                                     notification (before 5.0):
//	                                     seccomp(SECCOMP_GET_NOTIF_SIZES) and
//	                                     a filter loaded with
//	                                     SECCOMP_FILTER_FLAG_NEW_LISTENER fail
//	                                     with EINVAL, as such a kernel answers
//	                                     an unknown operation or flag (which
//	                                     is also how libseccomp finds its API
//	                                     level below 5); docker+nonotify is
//	                                     Docker's profile on such a kernel
//	degrade abi2 PROGRAM [ARG...]        a kernel with Landlock ABI 2 (Debian
//	                                     12's 6.1): see abi2 below
//	degrade nouserns PROGRAM [ARG...]    a host without user namespaces
//	                                     (user.max_user_namespaces=0): PROGRAM
//	                                     runs as the caller, uid and gid
//	                                     unchanged and without capabilities,
//	                                     but in a user namespace of its own
//	                                     (mapping only the caller's ids onto
//	                                     themselves) whose max_user_namespaces
//	                                     is 0 — the limit is per user
//	                                     namespace, and only a process with
//	                                     CAP_SYS_RESOURCE in it may set it.
//	                                     Unlike `unshare -Ur`, which runs
//	                                     PROGRAM as the namespace's root with
//	                                     every capability over the caller's
//	                                     files, an unprivileged caller stays
//	                                     unprivileged (see nouserns below)
//
// Profiles combine with "+" (docker+abi2): one filter holds the rules of
// all of them.
package main

/*
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void degrade_write(const char *path, const char *data) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, data, strlen(data)) != (ssize_t)strlen(data)) {
		fprintf(stderr, "degrade: nouserns: write %s: %s\n", path, strerror(errno));
		_exit(126);
	}
	close(fd);
}

// degrade_nouserns runs before the Go runtime starts its threads (a
// multi-threaded process cannot unshare its user namespace): glibc calls
// the constructors of the program with main's arguments. For the nouserns
// profile it moves the process into a user namespace that maps only the
// caller's uid and gid onto themselves, and there sets
// max_user_namespaces to 0 while it still holds the namespace's
// capabilities; the exec of PROGRAM drops them unless the caller is
// root (uid 0 is root in the namespace too, as with `unshare -Ur`).
__attribute__((constructor)) static void degrade_nouserns(int argc, char **argv, char **envp) {
	(void)envp;
	if (argc < 2) {
		return;
	}
	char profiles[256];
	snprintf(profiles, sizeof profiles, "+%s+", argv[1]);
	if (strstr(profiles, "+nouserns+") == NULL) {
		return;
	}
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (unshare(CLONE_NEWUSER) != 0) {
		fprintf(stderr, "degrade: nouserns: unshare(CLONE_NEWUSER): %s\n", strerror(errno));
		_exit(126);
	}
	char map[64];
	degrade_write("/proc/self/setgroups", "deny");
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	degrade_write("/proc/self/uid_map", map);
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	degrade_write("/proc/self/gid_map", map);
	degrade_write("/proc/sys/user/max_user_namespaces", "0\n");
}
*/
import "C"

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	seccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// rule is one syscall to deny, optionally only when arg 0 has one of the
// bits in anyBit0, or only when it is exactly arg0 (exact), or only when
// every one of conds holds. errno 0 makes the call return 0 without doing
// anything.
type rule struct {
	name    string
	errno   unix.Errno
	anyBit0 []uint64
	exact   bool
	arg0    uint64
	conds   []argCond
}

// argCond holds when (argument arg & mask) == value.
type argCond struct{ arg, mask, value uint64 }

// The seccomp(2) operations and the filter flag of user notification.
const (
	seccompSetModeFilter   = 1 // SECCOMP_SET_MODE_FILTER
	seccompGetNotifSizes   = 3 // SECCOMP_GET_NOTIF_SIZES (Linux 5.0)
	seccompFlagNewListener = 8 // SECCOMP_FILTER_FLAG_NEW_LISTENER (Linux 5.0)
)

func profiles() map[string][]rule {
	otherNS := []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
		unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWTIME}
	return map[string][]rule{
		"nouserns": {}, // the user namespace of degrade_nouserns, no filter
		"nolandlock": {
			{name: "landlock_create_ruleset", errno: unix.ENOSYS},
			{name: "landlock_add_rule", errno: unix.ENOSYS},
			{name: "landlock_restrict_self", errno: unix.ENOSYS},
		},
		"apparmor": {
			{name: "unshare", errno: 0, exact: true, arg0: unix.CLONE_NEWUSER},
			{name: "unshare", errno: unix.EPERM, anyBit0: otherNS},
			{name: "setns", errno: unix.EPERM},
			{name: "mount", errno: unix.EPERM},
		},
		"usernsonly": {
			{name: "unshare", errno: unix.EPERM, anyBit0: otherNS},
			{name: "setns", errno: unix.EPERM},
			{name: "mount", errno: unix.EPERM},
		},
		"docker": {
			{name: "unshare", errno: unix.EPERM},
			{name: "setns", errno: unix.EPERM},
			{name: "mount", errno: unix.EPERM},
			{name: "pidfd_getfd", errno: unix.EPERM},
		},
		"nonotify": {
			{name: "seccomp", errno: unix.EINVAL, conds: []argCond{{0, 0xffffffff, seccompGetNotifSizes}}},
			{name: "seccomp", errno: unix.EINVAL, conds: []argCond{
				{0, 0xffffffff, seccompSetModeFilter}, {1, seccompFlagNewListener, seccompFlagNewListener}}},
		},
	}
}

func main() {
	if arg(1) == abi2ServerArg {
		os.Exit(abi2Server())
	}
	var rules []rule
	spoofABI := false
	for _, name := range strings.Split(arg(1), "+") {
		r, ok := profiles()[name]
		switch {
		case name == "abi2":
			spoofABI = true
		case !ok:
			usage()
		}
		rules = append(rules, r...)
	}
	if len(os.Args) < 3 {
		usage()
	}
	var err error
	if spoofABI {
		err = loadABI2(rules)
	} else {
		err = load(rules)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "degrade:", err)
		os.Exit(126)
	}
	path, err := exec.LookPath(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "degrade:", err)
		os.Exit(127)
	}
	err = syscall.Exec(path, os.Args[2:], os.Environ())
	fmt.Fprintln(os.Stderr, "degrade: exec:", err)
	os.Exit(126)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: degrade nolandlock|apparmor|usernsonly|docker|nonotify|abi2[+...] PROGRAM [ARG...]")
	os.Exit(2)
}

func arg(i int) string {
	if i < len(os.Args) {
		return os.Args[i]
	}
	return ""
}

func load(rules []rule) error {
	if len(rules) == 0 {
		return nil // nouserns alone: nothing to filter (nor no_new_privs to set)
	}
	f, err := filter(rules)
	if err != nil {
		return err
	}
	defer f.Release()
	return f.Load()
}

func filter(rules []rule) (*seccomp.ScmpFilter, error) {
	f, err := seccomp.NewFilter(seccomp.ActAllow)
	if err != nil {
		return nil, err
	}
	if err := addRules(f, rules); err != nil {
		f.Release()
		return nil, err
	}
	return f, nil
}

func addRules(f *seccomp.ScmpFilter, rules []rule) error {
	for _, r := range rules {
		nr, err := seccomp.GetSyscallFromName(r.name)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		act := seccomp.ActErrno.SetReturnCode(int16(r.errno))
		switch {
		case r.conds != nil:
			var cs []seccomp.ScmpCondition
			for _, x := range r.conds {
				var c seccomp.ScmpCondition
				if c, err = seccomp.MakeCondition(uint(x.arg), seccomp.CompareMaskedEqual, x.mask, x.value); err != nil {
					break
				}
				cs = append(cs, c)
			}
			if err == nil {
				err = f.AddRuleConditional(nr, act, cs)
			}
		case r.exact:
			var c seccomp.ScmpCondition
			if c, err = seccomp.MakeCondition(0, seccomp.CompareMaskedEqual, 0xffffffff, r.arg0); err == nil {
				err = f.AddRuleConditional(nr, act, []seccomp.ScmpCondition{c})
			}
		case r.anyBit0 == nil:
			err = f.AddRule(nr, act)
		}
		for _, bit := range r.anyBit0 {
			var c seccomp.ScmpCondition
			if c, err = seccomp.MakeCondition(0, seccomp.CompareMaskedEqual, bit, bit); err == nil {
				err = f.AddRuleConditional(nr, act, []seccomp.ScmpCondition{c})
			}
			if err != nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("rule %s: %w", r.name, err)
		}
	}
	return nil
}

// abi2: the program's first Landlock version queries
// (landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)) return
// 2, so dsh-sandbox-run builds its ruleset for ABI 2: no TRUNCATE, no
// IOCTL_DEV, no scopes in the handled rights, which this kernel then
// enforces as a 6.1 kernel does. The answer comes from a user-notification
// listener held by a server process started before the filter (so not
// filtered itself). A filter chain may hold only one listener, and the
// sandbox's runner needs its own: the server also receives
// setsockopt(SOL_SOCKET, SO_SNDBUF) — which dsh-sandbox-run makes on its
// control socket before it sends the runner the spec's second part,
// ignoring the result — and, once it has answered a version query, closes
// the listener while that call waits: the call fails with ENOSYS, and only
// then does the supervisor go on and send the spec, so that the runner's
// command, which loads its filter after that, gets the listener the kernel
// now accepts (a runner forked while the server's listener was open
// shares the server's filter, whose listener counts only while it is
// open). No race: the close happens before the waiting call returns.
// Every later version query (the command's, a second preparation's) fails
// with ENOSYS, as without Landlock. Should dsh-sandbox-run stop making that
// setsockopt call, its runner fails with EBUSY, loudly.
const abi2ServerArg = "__abi2-server"

func loadABI2(rules []rule) error {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	srv := os.NewFile(uintptr(pair[1]), "abi2-server")
	proc, err := os.StartProcess("/proc/self/exe", []string{"degrade", abi2ServerArg},
		&os.ProcAttr{Files: []*os.File{nil, nil, os.Stderr, srv}})
	srv.Close()
	if err != nil {
		unix.Close(pair[0])
		return fmt.Errorf("start the abi2 server: %w", err)
	}
	proc.Release()
	f, err := filter(rules)
	if err != nil {
		return err
	}
	defer f.Release()
	for _, c := range []struct {
		name  string
		conds [][3]uint64 // arg, mask, value
	}{
		{"landlock_create_ruleset", [][3]uint64{{0, ^uint64(0), 0}, {1, ^uint64(0), 0}, {2, 0xffffffff, 1}}},
		{"setsockopt", [][3]uint64{{1, 0xffffffff, unix.SOL_SOCKET}, {2, 0xffffffff, unix.SO_SNDBUF}}},
	} {
		nr, err := seccomp.GetSyscallFromName(c.name)
		if err != nil {
			return err
		}
		var conds []seccomp.ScmpCondition
		for _, x := range c.conds {
			cond, err := seccomp.MakeCondition(uint(x[0]), seccomp.CompareMaskedEqual, x[1], x[2])
			if err != nil {
				return err
			}
			conds = append(conds, cond)
		}
		if err := f.AddRuleConditional(nr, seccomp.ActNotify, conds); err != nil {
			return fmt.Errorf("rule %s: %w", c.name, err)
		}
	}
	if err := f.Load(); err != nil {
		return err
	}
	lfd, err := f.GetNotifFd()
	if err != nil {
		return err
	}
	err = unix.Sendmsg(pair[0], []byte{1}, unix.UnixRights(int(lfd)), nil, 0)
	unix.Close(int(lfd))
	unix.Close(pair[0])
	return err
}

// abi2Server serves the listener it receives on fd 3 (see loadABI2).
func abi2Server() int {
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(3, buf, oob, unix.MSG_CMSG_CLOEXEC)
	unix.Close(3)
	if err != nil {
		fmt.Fprintln(os.Stderr, "degrade abi2 server:", err)
		return 1
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		fmt.Fprintln(os.Stderr, "degrade abi2 server: no listener", err)
		return 1
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		fmt.Fprintln(os.Stderr, "degrade abi2 server: no listener", err)
		return 1
	}
	lfd := seccomp.ScmpFd(fds[0])
	answered := false
	for {
		// POLLHUP: every process under the filter is gone.
		pfd := []unix.PollFd{{Fd: int32(lfd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return 1
		}
		if pfd[0].Revents&unix.POLLIN == 0 {
			return 0
		}
		req, err := seccomp.NotifReceive(lfd)
		if err != nil {
			continue // the caller is gone
		}
		name, _ := req.Data.Syscall.GetName()
		switch {
		case name == "landlock_create_ruleset":
			seccomp.NotifRespond(lfd, &seccomp.ScmpNotifResp{ID: req.ID, Val: 2})
			answered = true
		case !answered:
			seccomp.NotifRespond(lfd, &seccomp.ScmpNotifResp{ID: req.ID, Flags: seccomp.NotifRespFlagContinue})
		default:
			// The supervisor's SO_SNDBUF, before its runner starts: the
			// close fails it with ENOSYS and frees the chain's listener.
			unix.Close(int(lfd))
			return 0
		}
	}
}
