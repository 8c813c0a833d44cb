package testhost

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
)

// RequireConfined skips the test when the confined modes cannot run on this
// host, or fails it when DSH_REQUIRE_LANDLOCK=1 or CI=true.
func RequireConfined(t testing.TB) {
	t.Helper()
	if r := sandbox.ProbeWith(sandbox.ProbeOptions{Workspace: t.TempDir()}); !r.Confined {
		msg := "the confined modes cannot run on this host (see dsh-sandbox-run --probe)"
		if os.Getenv("DSH_REQUIRE_LANDLOCK") == "1" || os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; set DSH_REQUIRE_LANDLOCK=1 to make this a failure")
	}
}

// CountProcs counts the processes of the host whose argv is exactly argv
// (read from /proc/PID/cmdline). A process whose execve has not finished
// yet reads as an empty argv, so callers that wait for a process to appear
// poll until a deadline.
func CountProcs(t testing.TB, argv ...string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	want := strings.Join(argv, "\x00") + "\x00"
	n := 0
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(b) == want {
			n++
		}
	}
	return n
}

// TestUser is the unprivileged account the tests' "user" halves run as:
// $DSH_TEST_USER, default dshtest. A missing account fails the test under
// CI=true or when DSH_TEST_USER is set, else skips it saying loudly that
// the unprivileged half did not run; an account of uid 0 fails it.
func TestUser(t testing.TB) *user.User {
	t.Helper()
	name := os.Getenv("DSH_TEST_USER")
	if name == "" {
		name = "dshtest"
	}
	u, err := user.Lookup(name)
	if err != nil {
		msg := fmt.Sprintf("!!! UNPRIVILEGED TEST USER %q NOT FOUND (%v): the unprivileged half DID NOT RUN. Create it with: useradd -m -s /bin/bash %s", name, err, name)
		if os.Getenv("CI") == "true" || os.Getenv("DSH_TEST_USER") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if u.Uid == "0" {
		t.Fatalf("DSH_TEST_USER %q is uid 0; it must be unprivileged", name)
	}
	return u
}
