package testhost

import (
	"os/exec"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
)

func TestCountProcs(t *testing.T) {
	const arg = "31.4159"
	if n := CountProcs(t, "sleep", arg); n != 0 {
		t.Fatalf("%d processes already run sleep %s", n, arg)
	}
	cmd := exec.Command("sleep", arg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	// Start returns once execve has closed the close-on-exec pipe, which is
	// before the kernel has set up the new argv: /proc/PID/cmdline can still
	// read empty for a moment (seen in a TCG VM), so wait for it.
	deadline := time.Now().Add(testtime.Scale(5 * time.Second))
	n := CountProcs(t, "sleep", arg)
	for n != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		n = CountProcs(t, "sleep", arg)
	}
	if n != 1 {
		t.Fatalf("CountProcs(sleep %s) = %d, want 1", arg, n)
	}
}

func TestTestUser(t *testing.T) {
	u := TestUser(t) // fails or skips, saying so, when the account is missing
	if u.Uid == "0" || u.Username == "" {
		t.Fatalf("TestUser = %+v, want an unprivileged account", u)
	}
}
