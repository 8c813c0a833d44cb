// Command degrade simulates a degraded host for one program: it loads a
// seccomp filter (default allow), then execs PROGRAM.
//
//	degrade nolandlock PROGRAM [ARG...]  a kernel without Landlock: the three
//	                                     landlock_* calls fail with ENOSYS
//	degrade usernsonly PROGRAM [ARG...]  Ubuntu's AppArmor userns restriction:
//	                                     a user namespace can be created, but
//	                                     unshare of any other namespace, setns
//	                                     and mount fail with EPERM (unshare of
//	                                     CLONE_FS or CLONE_FILES still works)
//	degrade docker PROGRAM [ARG...]      Docker's default seccomp profile
//	                                     without CAP_SYS_PTRACE: unshare,
//	                                     setns and mount fail with EPERM (no
//	                                     user namespace), and so does
//	                                     pidfd_getfd (no supervisor can take a
//	                                     seccomp listener: no user
//	                                     notification)
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	seccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// rule is one syscall to deny, optionally only when arg 0 has one of the
// bits in anyBit0.
type rule struct {
	name    string
	errno   unix.Errno
	anyBit0 []uint64
}

func profiles() map[string][]rule {
	otherNS := []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
		unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWTIME}
	return map[string][]rule{
		"nolandlock": {
			{name: "landlock_create_ruleset", errno: unix.ENOSYS},
			{name: "landlock_add_rule", errno: unix.ENOSYS},
			{name: "landlock_restrict_self", errno: unix.ENOSYS},
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
	}
}

func main() {
	rules, ok := profiles()[arg(1)]
	if !ok || len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: degrade nolandlock|usernsonly|docker PROGRAM [ARG...]")
		os.Exit(2)
	}
	if err := load(rules); err != nil {
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

func arg(i int) string {
	if i < len(os.Args) {
		return os.Args[i]
	}
	return ""
}

func load(rules []rule) error {
	f, err := seccomp.NewFilter(seccomp.ActAllow)
	if err != nil {
		return err
	}
	defer f.Release()
	for _, r := range rules {
		nr, err := seccomp.GetSyscallFromName(r.name)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		act := seccomp.ActErrno.SetReturnCode(int16(r.errno))
		if r.anyBit0 == nil {
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
	return f.Load()
}
