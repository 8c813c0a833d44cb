package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pidsCgroup creates a pids cgroup (v2, or v1's pids hierarchy) limited to
// max tasks, removed when the test ends. It returns the cgroup.procs file.
func pidsCgroup(t *testing.T, max int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("!!! creating a pids cgroup needs root: thread-exhaustion test NOT RUN")
	}
	var dir string
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(string(b), "pids") {
		_ = os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+pids"), 0)
		dir = "/sys/fs/cgroup"
	} else if fi, err := os.Stat("/sys/fs/cgroup/pids"); err == nil && fi.IsDir() {
		dir = "/sys/fs/cgroup/pids"
	} else {
		t.Fatalf("no pids cgroup controller on this host (neither v2 nor v1): cannot limit tasks")
	}
	dir = filepath.Join(dir, "dsh-it-pids-"+nonce())
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create pids cgroup: %v", err)
	}
	t.Cleanup(func() {
		for i := 0; i < 200; i++ {
			if os.Remove(dir) == nil {
				return
			}
			for _, p := range cgroupPids(dir) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Errorf("pids cgroup %s could not be removed (processes left: %v)", dir, cgroupPids(dir))
	})
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(max)), 0); err != nil {
		t.Fatalf("pids.max: %v", err)
	}
	return filepath.Join(dir, "cgroup.procs")
}

func cgroupPids(dir string) []int {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// TestThreadExhaustionIsOneLine: with only a few tasks left (a pids cgroup),
// dsh-sandbox-run either runs the command or ends with exit 125 and one line —
// never the Go runtime's crash dump — and nothing it started survives.
func TestThreadExhaustionIsOneLine(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		refused := 0
		for max := 2; max <= 12; max++ {
			t.Run(fmt.Sprintf("pids.max=%d", max), func(t *testing.T) {
				procs := pidsCgroup(t, max)
				ws := id.workspace(t)
				// The wrapper (root) moves itself into the cgroup, then
				// becomes the identity and executes the CLI.
				drop := ""
				if id.switchTo {
					drop = fmt.Sprintf("setpriv --reuid=%d --regid=%d --clear-groups -- ", id.uid, id.gid)
				}
				script := `echo $$ > "$1" && shift && exec ` + drop + `"$@"`
				args := []string{"sh", "-c", script, "sh", procs, cliPath, "--mode", "workspace-write", "--workspace", ws, "--",
					"bash", "-c", "echo ok"}
				cmd := exec.Command(args[0], args[1:]...)
				cmd.Env = id.env()
				cmd.Dir = ws
				var stdout, stderr strings.Builder
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case <-done:
				case <-time.After(60 * time.Second):
					_ = cmd.Process.Kill()
					<-done
					t.Fatalf("dsh-sandbox-run did not end within 60 s at pids.max=%d", max)
				}
				exit := cmd.ProcessState.ExitCode()
				t.Logf("pids.max=%d: exit=%d stdout=%q stderr=%q", max, exit, stdout.String(), stderr.String())
				switch exit {
				case 0:
					if stdout.String() != "ok\n" {
						t.Errorf("exit 0 but stdout %q", stdout.String())
					}
				case 125:
					refused++
					ls := lines(stderr.String())
					if len(ls) != 1 || !strings.HasPrefix(ls[0], cliPrefix) {
						t.Errorf("want exactly one line starting %q, got %q", cliPrefix, stderr.String())
					}
				default:
					t.Errorf("exit %d (want 0 or 125); stderr=%q", exit, trunc(stderr.String()))
				}
				if strings.Contains(stderr.String(), "goroutine ") || strings.Contains(stderr.String(), "SIGABRT") {
					t.Errorf("Go runtime crash dump on stderr: %q", trunc(stderr.String()))
				}
				// Nothing the CLI started outlives it: the cgroup empties.
				dir := filepath.Dir(procs)
				for deadline := time.Now().Add(10 * time.Second); len(cgroupPids(dir)) > 0; time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("processes left in the cgroup after dsh-sandbox-run ended: %v", cgroupPids(dir))
					}
				}
			})
		}
		if refused == 0 {
			t.Errorf("no pids.max from 2 to 12 was refused: the limit was not exercised")
		}
	})
}
