//go:build linux

package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// BenchmarkAuditWalk: the audit of one command that changes nothing (Start,
// then Finish) in a workspace of DSH_BENCH_AUDIT_DIRS directories (20,000)
// of 10 files each and a repository's .git, settled (every change time
// older than recentCTime): listed-twice lists every directory at the start
// and again at the end (the walk without records, the baseline); uncached is
// a command without a cache (the CLI's: the end takes what did not change
// from the start's records); cached is a command of an executor, whose
// cache holds the previous command's records; watched, one whose cache
// also watches them (the executor's), and watched-changing the same for a
// command that adds and removes a file at the top. Reported: x-listed-twice, the
// time ratio to the baseline.
func BenchmarkAuditWalk(b *testing.B) {
	dirs := 20000
	if s := os.Getenv("DSH_BENCH_AUDIT_DIRS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("DSH_BENCH_AUDIT_DIRS=%q: want a positive number of directories", s)
		}
		dirs = n
	}
	ws, err := os.MkdirTemp("/var/tmp", "dsh-bench-audit-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(ws) })
	for i := range dirs {
		d := filepath.Join(ws, fmt.Sprintf("d%03d", i/100), fmt.Sprintf("s%02d", i%100))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 10 {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d", f)), []byte("x\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, d := range []string{".git/objects/info", ".git/refs/heads", ".git/hooks"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	time.Sleep(recentCTime + 100*time.Millisecond) // settled
	p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws})
	if err != nil {
		b.Fatal(err)
	}
	command := func(b *testing.B, cache *Cache, change bool) {
		a, err := Start(p, nil, cache)
		if err != nil {
			b.Fatal(err)
		}
		if change {
			f := filepath.Join(ws, "new.txt")
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				b.Fatal(err)
			}
			if err := os.Remove(f); err != nil {
				b.Fatal(err)
			}
		}
		log := facts.NewLog()
		Finish(a, log, true)
		if len(log.List()) != 0 {
			b.Fatalf("a command that changed nothing has denials %v", log.List())
		}
	}
	var baseline float64
	b.Run("listed-twice", func(b *testing.B) {
		v, err := openView(ws, "")
		if err != nil {
			b.Fatal(err)
		}
		defer v.close()
		for b.Loop() {
			for range 2 {
				if _, err := scanGit(v, nil, 0, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
		}
		baseline = float64(b.Elapsed()) / float64(b.N)
	})
	report := func(b *testing.B) {
		if baseline > 0 {
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/baseline, "x-listed-twice")
		}
	}
	b.Run("uncached", func(b *testing.B) {
		for b.Loop() {
			command(b, nil, false)
		}
		report(b)
	})
	for _, c := range []struct {
		name          string
		watch, change bool
	}{{"cached", false, false}, {"watched", true, false}, {"watched-changing", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			cache := &Cache{watch: c.watch}
			defer cache.Close()
			command(b, cache, false)
			for b.Loop() {
				command(b, cache, c.change)
			}
			report(b)
		})
	}
}
