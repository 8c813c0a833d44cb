package sandbox_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// BenchmarkSpawn compares, in one run, starting `bash -c true` bare, through
// the library (Cmd.Run, workspace-write, every layer the host allows) and
// under bubblewrap with the upstream profile. Compare the ratios, not the
// absolute figures.
func BenchmarkSpawn(b *testing.B) {
	ws, err := os.MkdirTemp("/var/tmp", "dsh-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(ws)
	b.Run("bare", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := exec.Command("bash", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, m := range []modes.Mode{modes.WorkspaceWrite, modes.ReadOnly, modes.DangerFullAccess} {
		b.Run("sandbox-"+m.String(), func(b *testing.B) {
			p, err := modes.Derive(modes.Options{Mode: m, Workspace: ws})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				res, err := (&sandbox.Cmd{Policy: p, Args: []string{"bash", "-c", "true"}}).Run()
				if err != nil || res.ExitCode != 0 {
					b.Fatal(err, res)
				}
			}
		})
	}
	b.Run("bwrap", func(b *testing.B) {
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			b.Skip("bubblewrap is not installed (make bench-deps)")
		}
		for i := 0; i < b.N; i++ {
			err := exec.Command(bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--die-with-parent",
				"--tmpfs", "/tmp", "--bind", ws, ws, "--", "bash", "-c", "true").Run()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkNotifiedWrites measures what the supervisor adds to write-like
// calls: one op is a command creating 1000 files on tmpfs, confined
// (every open for writing is a user notification) and unconfined, in one run.
func BenchmarkNotifiedWrites(b *testing.B) {
	ws, err := os.MkdirTemp("/dev/shm", "dsh-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(ws)
	script := `d=$(mktemp -d -p .); for i in $(seq 1 1000); do echo x > $d/f$i; done; rm -rf $d`
	for _, m := range []modes.Mode{modes.DangerFullAccess, modes.WorkspaceWrite} {
		b.Run(m.String(), func(b *testing.B) {
			p, err := modes.Derive(modes.Options{Mode: m, Workspace: ws})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				res, err := (&sandbox.Cmd{Policy: p, Args: []string{"bash", "-c", script}, Dir: ws}).Run()
				if err != nil || res.ExitCode != 0 {
					b.Fatal(err, res)
				}
			}
		})
	}
}
