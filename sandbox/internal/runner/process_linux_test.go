//go:build linux

package runner

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/proc"
)

// killDescendantsHelper, set in the environment, makes this test binary the
// child subreaper TestKillDescendants needs (the test process itself must
// not become one).
const killDescendantsHelper = "DSH_TEST_KILL_DESCENDANTS"

// TestKillDescendants: a zombie child reaped on the fast path must not end
// KillDescendants while a live descendant remains (the zombie's orphan,
// reparented to the subreaper); with only zombies left it returns with no
// child at all.
func TestKillDescendants(t *testing.T) {
	for _, tc := range []struct{ name, script string }{
		{"zombie and its live orphan", "sleep 1000 & echo $!; exit 0"},
		{"zombie only", "echo 0; exit 0"},
		{"live child", "echo $$; exec sleep 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestKillDescendants$")
			cmd.Env = append(os.Environ(), killDescendantsHelper+"="+tc.script)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "helper: ok") {
				t.Fatalf("helper said:\n%s", out)
			}
		})
	}
}

func init() {
	script := os.Getenv(killDescendantsHelper)
	if script == "" {
		return
	}
	if err := killDescendantsCase(script); err != nil {
		os.Stdout.WriteString("helper: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString("helper: ok\n")
	os.Exit(0)
}

// killDescendantsCase runs script (which prints a pid to watch, 0 for
// none) as a child of this child subreaper, waits for the child to be a
// zombie or for the pid to run, and checks that KillDescendants leaves no
// child and that the pid is gone.
func killDescendantsCase(script string) error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return err
	}
	sh := exec.Command("sh", "-c", script)
	stdout, err := sh.StdoutPipe()
	if err != nil {
		return err
	}
	if err := sh.Start(); err != nil {
		return err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return err
	}
	watched, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return err
	}
	if watched != sh.Process.Pid {
		// The shell exits: wait (without reaping) for its zombie.
		var si unix.Siginfo
		if err := unix.Waitid(unix.P_PID, sh.Process.Pid, &si, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
			return err
		}
	}
	done := make(chan struct{})
	go func() { KillDescendants(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		return errors.New("KillDescendants did not return")
	}
	if _, err := unix.Wait4(-1, nil, unix.WNOHANG, nil); !errors.Is(err, unix.ECHILD) {
		return errors.New("a child is left after KillDescendants")
	}
	if watched > 0 {
		if p, ok := proc.ReadStat(watched); ok {
			return errors.New("pid " + strconv.Itoa(watched) + " still exists after KillDescendants, state " + string(p.State))
		}
	}
	return nil
}
