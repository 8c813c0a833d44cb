package testhost

import (
	"os"
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
// (read from /proc/PID/cmdline).
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
