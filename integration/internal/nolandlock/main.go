// Command nolandlock simulates a kernel without Landlock: it loads a seccomp
// filter (default allow) that makes landlock_create_ruleset, landlock_add_rule
// and landlock_restrict_self fail with ENOSYS, then execs argv[1:].
//
// Usage: nolandlock PROGRAM [ARG...]
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
		fmt.Fprintln(os.Stderr, "usage: nolandlock PROGRAM [ARG...]")
		os.Exit(2)
	}
	if err := load(); err != nil {
		fmt.Fprintln(os.Stderr, "nolandlock:", err)
		os.Exit(126)
	}
	path, err := exec.LookPath(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nolandlock:", err)
		os.Exit(127)
	}
	err = syscall.Exec(path, os.Args[1:], os.Environ())
	fmt.Fprintln(os.Stderr, "nolandlock: exec:", err)
	os.Exit(126)
}

func load() error {
	f, err := seccomp.NewFilter(seccomp.ActAllow)
	if err != nil {
		return err
	}
	defer f.Release()
	enosys := seccomp.ActErrno.SetReturnCode(int16(unix.ENOSYS))
	for _, name := range []string{"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"} {
		sc, err := seccomp.GetSyscallFromName(name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := f.AddRule(sc, enosys); err != nil {
			return fmt.Errorf("rule %s: %w", name, err)
		}
	}
	return f.Load()
}
