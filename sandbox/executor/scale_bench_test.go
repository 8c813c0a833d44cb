//go:build linux

package executor_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// BenchmarkExecutorWorkspaceScale: Executor.Run of `true` (or of
// DSH_BENCH_SCALE_COMMAND), workspace-write, in git repositories of growing
// size (DSH_BENCH_SCALE_FILES, default "1000 200000": files, 10 to a
// directory, 100 directories to a parent),
// each interleaved with bubblewrap's upstream profile in the same workspace.
// Each sub-benchmark reports run-ms, bwrap-ms (medians), x-bwrap, and
// x-smallest: its run's median against the smallest repository's, the
// figure the flat-in-workspace-size target reads (<= 1.15). The fixtures
// are made before the timing and left to settle (their directories' change
// times older than the audit cache's settle time), as a workspace between
// an agent's commands is.
func BenchmarkExecutorWorkspaceScale(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		benchSkip(b, "git is not installed: no repository to measure in")
	}
	command := envOr("DSH_BENCH_SCALE_COMMAND", "true")
	var sizes []int
	for _, f := range strings.Fields(envOr("DSH_BENCH_SCALE_FILES", "1000 200000")) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 10 || n%10 != 0 {
			b.Fatalf("DSH_BENCH_SCALE_FILES: %q is not a positive multiple of 10", f)
		}
		sizes = append(sizes, n)
	}
	root, err := os.MkdirTemp("/var/tmp", "dsh-bench-scale-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(root) })
	repos := make([]string, len(sizes))
	for i, n := range sizes {
		repos[i] = filepath.Join(root, strconv.Itoa(n))
		if err := scaleRepo(repos[i], n); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second) // (settled: see the doc comment)
	var smallest float64
	for i, n := range sizes {
		b.Run(fmt.Sprintf("files-%d", n), func(b *testing.B) {
			e := benchExecutorIn(b, repos[i])
			bwrap, args := benchBwrap(b, repos[i])
			args = append(args, "bash", "-c", command)
			run := benchInterleaved(b, e, bwrap, args, command)
			if i == 0 {
				smallest = float64(run)
			}
			b.ReportMetric(float64(run)/smallest, "x-smallest")
		})
	}
}

// benchExecutorIn returns a workspace-write executor of workspace ws with a
// fresh spill directory.
func benchExecutorIn(b *testing.B, ws string) *executor.Executor {
	b.Helper()
	spill, err := os.MkdirTemp("/var/tmp", "dsh-bench-spill-")
	if err != nil {
		b.Fatal(err)
	}
	e, err := executor.New(executor.Config{Mode: modes.WorkspaceWrite, Workspace: ws, SpillDir: spill})
	if err != nil {
		os.RemoveAll(spill)
		b.Fatal(err)
	}
	b.Cleanup(func() {
		e.Close()
		os.RemoveAll(spill)
	})
	return e
}

// scaleRepo makes a committed git repository of n one-line files at dir.
func scaleRepo(dir string, n int) error {
	for i := range n {
		d := filepath.Join(dir, fmt.Sprintf("d%03d", i/1000), fmt.Sprintf("s%02d", i/10%100))
		if i%10 == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintf("line %d\n", i)), 0o644); err != nil {
			return err
		}
	}
	git := "git init -q -b main . && git add -A && git -c user.name=bench -c user.email=bench@localhost " +
		"-c commit.gpgsign=false -c gc.auto=0 commit -q -m fixture && git config gc.auto 0 && git status --porcelain >/dev/null"
	cmd := exec.Command("bash", "-c", git)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git repository of %d files: %v: %s", n, err, out)
	}
	return nil
}

// envOr is $name, or def when unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
