//go:build linux

package executor_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Benchmarks of the Executor. Each one measures its baseline in the same run
// and reports ratios as metrics ("x-…" is always a ratio of times: above 1 is
// slower than the baseline). Compare ratios, not absolute figures: the
// machines have 2 cores and any second load moves them. bench/executor.sh
// runs them all and prints a summary table.
//
// Environment:
//
//	DSH_BENCH_OUTPUT_BYTES  size of the output benchmark's stream (default 1G;
//	                        accepts a K, M or G suffix, binary units)
//	DSH_BENCH_IDLE_TASKS    background tasks of the idle-memory benchmark (20)

// benchExecutor returns an executor whose workspace and spill directory are
// fresh, removed at the end of the benchmark.
func benchExecutor(b *testing.B, cfg executor.Config) *executor.Executor {
	b.Helper()
	ws, err := os.MkdirTemp("/var/tmp", "dsh-bench-ws-")
	if err != nil {
		b.Fatal(err)
	}
	spill, err := os.MkdirTemp("/var/tmp", "dsh-bench-spill-")
	if err != nil {
		os.RemoveAll(ws)
		b.Fatal(err)
	}
	cfg.Workspace, cfg.SpillDir = ws, spill
	e, err := executor.New(cfg)
	if err != nil {
		os.RemoveAll(ws)
		os.RemoveAll(spill)
		b.Fatal(err)
	}
	b.Cleanup(func() {
		e.Close()
		os.RemoveAll(ws)
		os.RemoveAll(spill)
	})
	return e
}

// benchRun runs command under mode and fails the benchmark unless it exited 0.
func benchRun(b *testing.B, e *executor.Executor, mode modes.Mode, command string) *executor.RunResult {
	res, err := e.Run(context.Background(), executor.Request{Command: command, Mode: &mode})
	if err != nil {
		b.Fatalf("Run(%q, %v): %v", command, mode, err)
	}
	if res.ExitCode != 0 {
		b.Fatalf("Run(%q, %v): exit %d, stderr %q", command, mode, res.ExitCode, res.Stderr.Text)
	}
	return res
}

// benchBwrap returns the path of bwrap and its upstream profile's arguments
// for workspace ws, or skips the benchmark, saying why.
func benchBwrap(b *testing.B, ws string) (string, []string) {
	b.Helper()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		benchSkip(b, "bwrap (bubblewrap) is not installed: no bwrap baseline (make bench-deps installs it)")
	}
	args := []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--die-with-parent",
		"--tmpfs", "/tmp", "--bind", ws, ws, "--chdir", ws, "--"}
	if out, err := exec.Command(bwrap, append(args, "true")...).CombinedOutput(); err != nil {
		benchSkip(b, fmt.Sprintf("bwrap cannot run here (%v: %s): no bwrap baseline", err, strings.TrimSpace(string(out))))
	}
	return bwrap, args
}

// benchSkip skips the benchmark, saying why on stderr too: without -v,
// go test does not print a benchmark's skip message.
func benchSkip(b *testing.B, msg string) {
	b.Helper()
	if !testing.Verbose() {
		fmt.Fprintf(os.Stderr, "--- SKIP: %s: %s\n", b.Name(), msg)
	}
	b.Skip(msg)
}

// benchNsPerOp is the time per op of the benchmark so far (call it last).
func benchNsPerOp(b *testing.B) float64 {
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// BenchmarkExecutorSpawn: Executor.Run of `true` (a `bash -c true`) under
// each mode, against `bash -c true` from os/exec and under bubblewrap with
// its usual profile, measured first in the same run; bwrap-unshare-all
// adds the namespaces a confined Run creates, and cmd-workspace-write is
// sandbox.Cmd without the Executor. The sandboxed sub-benchmarks report
// x-bare and x-bwrap (time ratios); the target is x-bwrap <= 1 for
// run-workspace-write. Sub-benchmarks run one after the other, and the
// kernel tears namespaces down in the background, so a later one can pay
// for an earlier one's: interleaved-run-bwrap alternates the two and gives
// the fairer ratio.
func BenchmarkExecutorSpawn(b *testing.B) {
	e := benchExecutor(b, executor.Config{Mode: modes.WorkspaceWrite})
	ws := e.Workspace()
	var bareNs, bwrapNs float64
	b.Run("bare", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := exec.Command("bash", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
		bareNs = benchNsPerOp(b)
	})
	b.Run("bwrap", func(b *testing.B) {
		bwrap, args := benchBwrap(b, ws)
		args = append(args, "bash", "-c", "true")
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := exec.Command(bwrap, args...).Run(); err != nil {
				b.Fatal(err)
			}
		}
		bwrapNs = benchNsPerOp(b)
		if bareNs > 0 {
			b.ReportMetric(bwrapNs/bareNs, "x-bare")
		}
	})
	// The same isolation by namespaces as a confined Run (user, mount, pid,
	// net, ipc, uts), still without Landlock, seccomp or a supervisor.
	b.Run("bwrap-unshare-all", func(b *testing.B) {
		bwrap, args := benchBwrap(b, ws)
		args = append(append([]string{"--unshare-all"}, args...), "bash", "-c", "true")
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := exec.Command(bwrap, args...).Run(); err != nil {
				b.Fatal(err)
			}
		}
		if bareNs > 0 {
			b.ReportMetric(benchNsPerOp(b)/bareNs, "x-bare")
		}
	})
	// The layer below Run: sandbox.Cmd alone, so that x-bwrap splits into
	// what the sandbox costs and what the Executor adds (Resolve, pipes,
	// collectors, timer, goroutines).
	b.Run("cmd-workspace-write", func(b *testing.B) {
		p, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < b.N; i++ {
			res, err := (&sandbox.Cmd{Policy: p, Args: []string{"bash", "-c", "true"}, Dir: ws}).Run()
			if err != nil || res.ExitCode != 0 {
				b.Fatal(err, res)
			}
		}
		ns := benchNsPerOp(b)
		if bareNs > 0 {
			b.ReportMetric(ns/bareNs, "x-bare")
		}
		if bwrapNs > 0 {
			b.ReportMetric(ns/bwrapNs, "x-bwrap")
		}
	})
	for _, m := range []modes.Mode{modes.WorkspaceWrite, modes.ReadOnly, modes.DangerFullAccess} {
		b.Run("run-"+m.String(), func(b *testing.B) {
			benchRun(b, e, m, "true") // fail early, untimed, when the sandbox cannot run here
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				benchRun(b, e, m, "true")
			}
			ns := benchNsPerOp(b)
			if bareNs > 0 {
				b.ReportMetric(ns/bareNs, "x-bare")
			}
			if bwrapNs > 0 {
				b.ReportMetric(ns/bwrapNs, "x-bwrap")
			}
		})
	}
	// Run (workspace-write) and bwrap alternately, one of each per op: both
	// see the same machine state (load, pending namespace teardown in the
	// kernel's workers), which sequential sub-benchmarks do not. Reported:
	// the median of each and x-bwrap, the ratio of the medians.
	b.Run("interleaved-run-bwrap", func(b *testing.B) {
		bwrap, args := benchBwrap(b, ws)
		args = append(args, "bash", "-c", "true")
		benchInterleaved(b, e, bwrap, args, "true")
	})
}

// benchInterleaved times b.N pairs of an Executor.Run of command
// (workspace-write) and a bwrap run of args, one of each per op, and
// reports run-ms and bwrap-ms (the medians) and x-bwrap (their ratio); it
// returns the run's median.
func benchInterleaved(b *testing.B, e *executor.Executor, bwrap string, args []string, command string) time.Duration {
	benchRun(b, e, modes.WorkspaceWrite, command)
	runD := make([]time.Duration, 0, b.N)
	bwrapD := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		benchRun(b, e, modes.WorkspaceWrite, command)
		t1 := time.Now()
		if err := exec.Command(bwrap, args...).Run(); err != nil {
			b.Fatal(err)
		}
		runD, bwrapD = append(runD, t1.Sub(t0)), append(bwrapD, time.Since(t1))
	}
	b.StopTimer()
	run, bw := benchMedian(runD), benchMedian(bwrapD)
	b.ReportMetric(float64(run.Microseconds())/1000, "run-ms")
	b.ReportMetric(float64(bw.Microseconds())/1000, "bwrap-ms")
	b.ReportMetric(float64(run)/float64(bw), "x-bwrap")
	return run
}

// benchMedian is the median of d (which it sorts).
func benchMedian(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// benchOutputSize is the output benchmark's stream size.
func benchOutputSize(b *testing.B) int64 {
	s := strings.TrimSpace(os.Getenv("DSH_BENCH_OUTPUT_BYTES"))
	if s == "" {
		return 1 << 30
	}
	n, err := modes.ParseSize(s)
	if err != nil || n <= 0 {
		b.Fatalf("DSH_BENCH_OUTPUT_BYTES=%q: want a positive size such as 1G, 256M or 1048576", os.Getenv("DSH_BENCH_OUTPUT_BYTES"))
	}
	return n
}

// benchProcKB reads a "Name:  N kB" field of /proc/<pid>/status (pid 0:
// self), or -1.
func benchProcKB(pid int, field string) int64 {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	return benchKBField(path, field)
}

// benchKBField reads the "field: N kB" line of a /proc file (or "field: N"),
// or -1.
func benchKBField(path, field string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return -1
		}
		return v
	}
	return -1
}

// benchResetPeakRSS resets this process's VmHWM to its current RSS
// (clear_refs "5", Linux >= 4.0), or fails.
func benchResetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Fatalf("cannot reset the peak RSS: %v", err)
	}
}

// BenchmarkExecutorOutput: bytes/s captured by Executor.Run from
// `head -c N /dev/zero` (N = DSH_BENCH_OUTPUT_BYTES, 1 GiB by default),
// against `head -c N /dev/zero | cat > /dev/null` from os/exec in the same
// run. Past the 64 000-byte tail the stream spills to a file until the
// 64 MiB spill cap, then the spill is deleted: all of it is measured.
// Reported: MB/s, x-pipe (time ratio to the pipe), and peak-RSS-MiB, the
// peak RSS (VmHWM, reset before each sub-benchmark) of this whole process
// — the baseline's figure is the floor. Target: >= 1 GB/s and a peak RSS
// that does not grow with N.
func BenchmarkExecutorOutput(b *testing.B) {
	size := benchOutputSize(b)
	e := benchExecutor(b, executor.Config{Mode: modes.WorkspaceWrite})
	cmd := fmt.Sprintf("head -c %d /dev/zero", size)
	reportRSS := func(b *testing.B, rss0 int64) {
		hwm := benchProcKB(0, "VmHWM")
		b.ReportMetric(float64(hwm)/1024, "peak-RSS-MiB")
		b.ReportMetric(float64(hwm-rss0)/1024, "peak-growth-MiB")
	}
	var pipeNs float64
	b.Run("pipe", func(b *testing.B) {
		b.SetBytes(size)
		runtime.GC()
		benchResetPeakRSS(b)
		rss0 := benchProcKB(0, "VmRSS")
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := exec.Command("bash", "-c", cmd+" | cat > /dev/null").Run(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		pipeNs = benchNsPerOp(b)
		reportRSS(b, rss0)
	})
	for _, m := range []modes.Mode{modes.WorkspaceWrite, modes.DangerFullAccess} {
		b.Run("run-"+m.String(), func(b *testing.B) {
			b.SetBytes(size)
			runtime.GC()
			benchResetPeakRSS(b)
			rss0 := benchProcKB(0, "VmRSS")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res := benchRun(b, e, m, cmd)
				if got, want := len(res.Stdout.Text), int(min(size, executor.DefaultTailBytes)); got != want {
					b.Fatalf("stdout tail: %d bytes, want %d", got, want)
				}
				if p := res.Stdout.SpillPath; p != "" {
					if size > executor.DefaultSpillCap {
						b.Fatalf("a %d-byte stream kept its spill file %s past the %d-byte cap", size, p, executor.DefaultSpillCap)
					}
					os.Remove(p) // left in place by design; not ours to keep
				}
			}
			b.StopTimer()
			ns := benchNsPerOp(b)
			reportRSS(b, rss0)
			if pipeNs > 0 {
				b.ReportMetric(ns/pipeNs, "x-pipe")
			}
		})
	}
}

// BenchmarkExecutorThroughput: commands per second with 2×GOMAXPROCS
// concurrent Runs of `true`, against as many concurrent `bash -c true`
// from os/exec, bare and under bwrap, in the same run. Reported: cmds/s,
// and x-bare and x-bwrap (time ratios per command: the inverse ratio of
// the rates).
func BenchmarkExecutorThroughput(b *testing.B) {
	e := benchExecutor(b, executor.Config{Mode: modes.WorkspaceWrite})
	var bareRate float64
	b.Run("bare", func(b *testing.B) {
		b.SetParallelism(2)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := exec.Command("bash", "-c", "true").Run(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		bareRate = float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(bareRate, "cmds/s")
	})
	var bwrapRate float64
	b.Run("bwrap", func(b *testing.B) {
		bwrap, args := benchBwrap(b, e.Workspace())
		args = append(args, "bash", "-c", "true")
		b.SetParallelism(2)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := exec.Command(bwrap, args...).Run(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		bwrapRate = float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(bwrapRate, "cmds/s")
		if bareRate > 0 {
			b.ReportMetric(bareRate/bwrapRate, "x-bare")
		}
	})
	for _, m := range []modes.Mode{modes.WorkspaceWrite, modes.DangerFullAccess} {
		b.Run("run-"+m.String(), func(b *testing.B) {
			benchRun(b, e, m, "true")
			b.SetParallelism(2)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := e.Run(context.Background(), executor.Request{Command: "true", Mode: &m})
					if err != nil || res.ExitCode != 0 {
						b.Error(err, res)
						return
					}
				}
			})
			rate := float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "cmds/s")
			if bareRate > 0 {
				b.ReportMetric(bareRate/rate, "x-bare")
			}
			if bwrapRate > 0 {
				b.ReportMetric(bwrapRate/rate, "x-bwrap")
			}
		})
	}
}

// benchDescendants returns every descendant of pid, through the children
// lists of all its threads (a child is listed under the thread that forked
// it).
func benchDescendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		lists, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, l := range lists {
			data, err := os.ReadFile(l)
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(data)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}

// benchComm is the command name of pid, or "".
func benchComm(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// benchIdleTasks is the idle-memory benchmark's task count.
func benchIdleTasks(b *testing.B) int {
	s := os.Getenv("DSH_BENCH_IDLE_TASKS")
	if s == "" {
		return 20
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("DSH_BENCH_IDLE_TASKS=%q: want a positive count", s)
	}
	return n
}

// benchSettleHeap collects garbage and returns freed memory to the OS, so
// that VmRSS shows what is live.
func benchSettleHeap() {
	runtime.GC()
	debug.FreeOSMemory()
}

// BenchmarkExecutorIdleMemory: what an idle background task costs. One op
// starts N (DSH_BENCH_IDLE_TASKS, 20) background `sleep 60`, waits until
// every sleep runs, measures, then kills them all and waits. Reported, per
// task:
//
//	harness-RSS-KiB/task  VmRSS growth of this process (garbage collected
//	                      and returned to the OS before both readings)
//	heap-KiB/task         growth of the Go heap and stacks in use
//	cold-harness-RSS-KiB/task  the same, in the first op of the process
//	                      only (reported by its sub-benchmark): the op that
//	                      pays for new OS threads, which Go keeps and later
//	                      ops reuse (run this benchmark alone for a true
//	                      cold figure)
//	goroutines/task       growth of the goroutine count
//	read-threads/task     growth of this process's threads blocked in
//	                      read(2): a goroutine reading a blocking fd holds
//	                      an OS thread (and its buffer) while the task idles
//	procs/task            resident processes besides the sleep itself
//	                      (runner/relay, pid-namespace init, ...)
//	procs-RSS-KiB/task    their summed VmRSS (shared pages counted in each)
//	procs-PSS-KiB/task    their summed PSS (shared pages split among sharers)
//	procs-USS-KiB/task    their private pages: what ending them frees at least
//
// ns/op is not meaningful here.
func BenchmarkExecutorIdleMemory(b *testing.B) {
	n := benchIdleTasks(b)
	for _, m := range []modes.Mode{modes.WorkspaceWrite, modes.DangerFullAccess} {
		b.Run(m.String(), func(b *testing.B) {
			e := benchExecutor(b, executor.Config{Mode: m})
			benchRun(b, e, m, "true") // warm up, and fail early when the sandbox cannot run here
			var rss, heap, gor, readers, procs, procRSS, procPSS, procUSS float64
			self := os.Getpid()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				benchSettleHeap()
				rss0, heap0, gor0 := benchProcKB(0, "VmRSS"), benchHeapKB(), runtime.NumGoroutine()
				readers0 := benchThreadsInRead()
				b.StartTimer()
				ps := make([]*executor.Process, 0, n)
				for k := 0; k < n; k++ {
					p, err := e.Start(context.Background(), executor.Request{Command: "sleep 60", Mode: &m})
					if err != nil {
						for _, p := range ps {
							p.Kill()
						}
						b.Fatal(err)
					}
					ps = append(ps, p)
				}
				b.StopTimer()
				// Every sleep must be resident before we measure.
				var tree []int
				deadline := time.Now().Add(10 * time.Second)
				for {
					tree = benchDescendants(self)
					sleeps := 0
					for _, pid := range tree {
						if benchComm(pid) == "sleep" {
							sleeps++
						}
					}
					if sleeps >= n {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("%d of %d sleeps running after 10s", sleeps, n)
					}
					time.Sleep(10 * time.Millisecond)
				}
				benchSettleHeap()
				rss += float64(benchProcKB(0, "VmRSS") - rss0)
				heap += float64(benchHeapKB() - heap0)
				gor += float64(runtime.NumGoroutine() - gor0)
				readers += float64(benchThreadsInRead() - readers0)
				if benchCold.name == "" {
					benchCold.name = b.Name()
					benchCold.kib = float64(benchProcKB(0, "VmRSS")-rss0) / float64(n)
				}
				for _, pid := range tree {
					if benchComm(pid) == "sleep" {
						continue
					}
					procs++
					procRSS += float64(benchProcKB(pid, "VmRSS"))
					rollup := fmt.Sprintf("/proc/%d/smaps_rollup", pid)
					procPSS += float64(benchKBField(rollup, "Pss"))
					procUSS += float64(benchKBField(rollup, "Private_Clean") + benchKBField(rollup, "Private_Dirty"))
				}
				b.StartTimer()
				for _, p := range ps {
					p.Kill()
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				for _, p := range ps {
					if _, err := p.Wait(ctx); err != nil {
						cancel()
						b.Fatalf("a killed task did not end: %v", err)
					}
				}
				cancel()
			}
			per := float64(b.N * n)
			b.ReportMetric(rss/per, "harness-RSS-KiB/task")
			b.ReportMetric(heap/per, "heap-KiB/task")
			b.ReportMetric(gor/per, "goroutines/task")
			b.ReportMetric(readers/per, "read-threads/task")
			if benchCold.name == b.Name() {
				b.ReportMetric(benchCold.kib, "cold-harness-RSS-KiB/task")
			}
			b.ReportMetric(procs/per, "procs/task")
			b.ReportMetric(procRSS/per, "procs-RSS-KiB/task")
			b.ReportMetric(procPSS/per, "procs-PSS-KiB/task")
			b.ReportMetric(procUSS/per, "procs-USS-KiB/task")
		})
	}
}

// benchCold is the process's first idle-memory op: its sub-benchmark and
// harness RSS growth per task.
var benchCold struct {
	name string
	kib  float64
}

// benchThreadsInRead counts this process's threads blocked in read(2),
// from /proc/self/task/*/syscall.
func benchThreadsInRead() int {
	files, _ := filepath.Glob("/proc/self/task/*/syscall")
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if nr, _, _ := strings.Cut(string(data), " "); nr == strconv.Itoa(syscall.SYS_READ) {
			n++
		}
	}
	return n
}

// benchHeapKB is the Go heap and stack memory in use, in KiB.
func benchHeapKB() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse+ms.StackInuse) / 1024
}
