// Command usernsonly simulates a host like Ubuntu >= 23.10 with AppArmor's
// unprivileged-userns restriction: creating a user namespace works, but
// nothing inside it does — it loads a seccomp filter (default allow) under
// which unshare of anything but CLONE_NEWUSER, and mount, fail with EPERM,
// then execs argv[1:].
//
// Usage: usernsonly PROGRAM [ARG...]
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	seccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: usernsonly PROGRAM [ARG...]")
		os.Exit(2)
	}
	if err := load(); err != nil {
		fmt.Fprintln(os.Stderr, "usernsonly:", err)
		os.Exit(126)
	}
	path, err := exec.LookPath(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "usernsonly:", err)
		os.Exit(127)
	}
	err = syscall.Exec(path, os.Args[1:], os.Environ())
	fmt.Fprintln(os.Stderr, "usernsonly: exec:", err)
	os.Exit(126)
}

func load() error {
	f, err := seccomp.NewFilter(seccomp.ActAllow)
	if err != nil {
		return err
	}
	defer f.Release()
	eperm := seccomp.ActErrno.SetReturnCode(int16(unix.EPERM))
	unshare, err := seccomp.GetSyscallFromName("unshare")
	if err != nil {
		return err
	}
	notUser, err := seccomp.MakeCondition(0, seccomp.CompareNotEqual, unix.CLONE_NEWUSER)
	if err != nil {
		return err
	}
	if err := f.AddRuleConditional(unshare, eperm, []seccomp.ScmpCondition{notUser}); err != nil {
		return err
	}
	for _, name := range []string{"mount", "setns"} {
		nr, err := seccomp.GetSyscallFromName(name)
		if err != nil {
			return err
		}
		if err := f.AddRule(nr, eperm); err != nil {
			return err
		}
	}
	return f.Load()
}
