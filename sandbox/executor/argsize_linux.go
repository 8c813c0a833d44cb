//go:build linux

package executor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/runner"
)

// Limits of execve(2) on a command's arguments and environment.
const (
	// maxArgStrlen is the kernel's limit on one argv or environment
	// string, its NUL included (MAX_ARG_STRLEN, 32 pages).
	maxArgStrlen = 32 * 4096
	// argRoom is kept free for what the spawn adds: the executed file's
	// name (which the kernel copies too) and the runner's marker variable,
	// with a margin.
	argRoom = 8192
)

// longCommandScript is the shell's script when the command cannot be an
// argument: it sources the command from fd 3 (a sealed memfd holding
// "exec 3<&-; " and the command), whose first words close fd 3, so the
// command runs with fd 3 closed and no variable left over. A source that
// cannot be read fails loudly (status 1), never as an empty success.
const longCommandScript = ". /dev/fd/3"

// argMax is how many bytes of argument and environment strings, with their
// pointers, one execve may take on this host: a quarter of the stack limit,
// at least 128 KiB and at most 6 MiB (fs/exec.c).
func argMax() int {
	limit := 6 << 20
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_STACK, &rl); err == nil && rl.Cur != unix.RLIM_INFINITY && rl.Cur/4 < uint64(limit) {
		limit = int(rl.Cur / 4)
	}
	return max(limit, 128<<10)
}

// execSize is what argv and env take of argMax.
func execSize(argv, env []string) int {
	n := 8 * (len(argv) + len(env) + 2)
	for _, s := range argv {
		n += len(s) + 1
	}
	for _, s := range env {
		n += len(s) + 1
	}
	return n
}

// shellArgv is the runner's view of a shell command line (the runner's
// argv[0], then the shell's argv).
func shellArgv(shell, script string) []string {
	return []string{runner.Arg0, filepath.Base(shell), "-c", script}
}

// commandFits reports whether command can be passed to the shell as its
// -c argument; otherwise it goes through a memfd (longCommandScript).
func commandFits(shell, command string, env []string) bool {
	return len(command) < maxArgStrlen && execSize(shellArgv(shell, command), env)+argRoom <= argMax()
}

// checkExecEnv refuses an environment no command can be started with: an
// entry over the kernel's per-string limit, or, with the shortest command
// line, more than the host's ARG_MAX.
func checkExecEnv(shell string, env []string) error {
	for _, kv := range env {
		if len(kv) >= maxArgStrlen {
			name, _, _ := strings.Cut(kv, "=")
			return invalidf("environment variable %q is %d bytes long; the kernel takes at most %d bytes per variable (name=value)", name, len(kv), maxArgStrlen-1)
		}
	}
	if n, limit := execSize(shellArgv(shell, longCommandScript), env)+argRoom, argMax(); n > limit {
		return invalidf("the environment (%d variables) takes %d bytes with the command line; the host's limit for a command's arguments and environment (ARG_MAX) is %d bytes", len(env), n, limit)
	}
	return nil
}

// commandFile returns a sealed memfd holding the source that
// longCommandScript runs: "exec 3<&-; " then the command.
func commandFile(command string) (*os.File, error) {
	fd, err := unix.MemfdCreate("dsh-sandbox-command", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "dsh-sandbox-command")
	if _, err := f.WriteString("exec 3<&-; " + command); err != nil {
		f.Close()
		return nil, fmt.Errorf("write the command's memfd: %w", err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal the command's memfd: %w", err)
	}
	return f, nil
}
