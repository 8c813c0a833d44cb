package testhost

import (
	"os/exec"
	"testing"
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
	if n := CountProcs(t, "sleep", arg); n != 1 {
		t.Fatalf("CountProcs(sleep %s) = %d, want 1", arg, n)
	}
}

func TestTestUser(t *testing.T) {
	u := TestUser(t) // fails or skips, saying so, when the account is missing
	if u.Uid == "0" || u.Username == "" {
		t.Fatalf("TestUser = %+v, want an unprivileged account", u)
	}
}
