#!/usr/bin/env bash
# Benchmarks of the Go sandbox Executor (sandbox/executor/executor_bench_test.go):
#   spawn       Executor.Run of `true` per mode vs `bash -c true` bare and under bwrap
#   output      bytes/s captured from `head -c 1G /dev/zero` vs a pipe into cat, and peak RSS
#   throughput  commands/s with 2×GOMAXPROCS concurrent Runs vs bare and bwrap
#   idle memory RSS per idle background task (supervisor side and resident processes)
# then a table of medians over COUNT runs, with the ratios each benchmark measured
# against its baseline in the same run.
#
# Usage: bench/executor.sh            (from anywhere; needs Go, cgo and libseccomp-dev)
# Environment: COUNT (3), BENCHTIME (200x: spawn and throughput), OUTPUT_BENCHTIME (3x),
#              IDLE_BENCHTIME (3x), DSH_BENCH_OUTPUT_BYTES (1G), DSH_BENCH_IDLE_TASKS (20),
#              BENCH_OUT (bench/results: the raw `go test` output is kept there),
#              GO (go, or /usr/local/go/bin/go when go is not on PATH).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
count="${COUNT:-3}"
benchtime="${BENCHTIME:-200x}"
output_benchtime="${OUTPUT_BENCHTIME:-3x}"
idle_benchtime="${IDLE_BENCHTIME:-3x}"
out_dir="${BENCH_OUT:-$repo/bench/results}"

die() { echo "executor.sh: $*" >&2; exit 1; }

# shellcheck source=bench/lib.sh
. "$repo/bench/lib.sh"
find_go
command -v python3 >/dev/null 2>&1 || die "python3 is missing (it reads the benchmark output)"
command -v bwrap >/dev/null 2>&1 \
  || echo "executor.sh: bwrap is not installed: the bwrap baselines and x-bwrap ratios are left out (make bench-deps)" >&2

if ! mkdir -p "$out_dir" 2>/dev/null || [ ! -w "$out_dir" ]; then
  out_dir="${TMPDIR:-/tmp}"
fi
raw="$out_dir/executor-$(date +%Y%m%d-%H%M%S).txt"

echo "== host"
echo "kernel: $(uname -sr); cpus: $(nproc); user: $(id -un) (uid $(id -u)); $("$go" version)"
if command -v bwrap >/dev/null 2>&1; then bwrap --version; fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -r /proc/pressure/cpu ]; then
  echo "cpu pressure: $(head -n1 /proc/pressure/cpu)"
fi
echo "(the figures move with any other load on the machine: compare ratios, from one run)"
echo

# Three invocations: the output and idle-memory benchmarks cost far more per op.
run() { # benchtime regexp
  (cd "$repo" && "$go" test -run '^$' -bench "$2" -benchtime "$1" -count "$count" -timeout 60m ./sandbox/executor)
}
echo "== go test -bench (raw output: $raw)"
{
  run "$benchtime" '^BenchmarkExecutor(Spawn|Throughput)$'
  run "$output_benchtime" '^BenchmarkExecutorOutput$'
  run "$idle_benchtime" '^BenchmarkExecutorIdleMemory$'
} 2>&1 | tee "$raw"
echo

echo "== medians over $count runs"
python3 - "$raw" <<'EOF'
import re, statistics, sys
from collections import defaultdict

runs = defaultdict(lambda: defaultdict(list))  # name -> unit -> values
order = []
for line in open(sys.argv[1]):
    m = re.match(r"^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$", line)
    if not m:
        continue
    name, fields = m.group(1)[len("Benchmark"):], m.group(3).split()
    if name not in runs:
        order.append(name)
    for value, unit in zip(fields[0::2], fields[1::2]):
        try:
            runs[name][unit].append(float(value))
        except ValueError:
            pass

def med(name, unit):
    v = runs.get(name, {}).get(unit)
    return statistics.median(v) if v else None

def fmt(v, spec):
    return "-" if v is None else format(v, spec)

def table(prefix, columns):
    names = [n for n in order if n.startswith(prefix)]
    if not names:
        return
    header = f"{'benchmark':<46}" + "".join(f"{c[0]:>{c[3]}}" for c in columns)
    print(header)
    for n in names:
        row = f"{n:<46}"
        for title, unit, spec, width, scale in columns:
            v = med(n, unit)
            row += f"{fmt(None if v is None else v * scale, spec):>{width}}"
        print(row)
    print()

table("ExecutorSpawn/", [
    ("ms/op", "ns/op", ".2f", 9, 1e-6),
    ("x bare", "x-bare", ".2f", 8, 1),
    ("x bwrap", "x-bwrap", ".2f", 9, 1),
    ("run ms", "run-ms", ".2f", 8, 1),
    ("bwrap ms", "bwrap-ms", ".2f", 10, 1),
])
table("ExecutorOutput/", [
    ("MB/s", "MB/s", ".0f", 8, 1),
    ("x pipe", "x-pipe", ".2f", 8, 1),
    ("peak RSS MiB", "peak-RSS-MiB", ".1f", 14, 1),
    ("peak growth MiB", "peak-growth-MiB", ".1f", 17, 1),
])
table("ExecutorThroughput/", [
    ("cmds/s", "cmds/s", ".0f", 8, 1),
    ("x bare", "x-bare", ".2f", 8, 1),
    ("x bwrap", "x-bwrap", ".2f", 9, 1),
])
table("ExecutorIdleMemory/", [
    ("harness KiB", "harness-RSS-KiB/task", ".0f", 13, 1),
    ("cold KiB", "cold-harness-RSS-KiB/task", ".0f", 10, 1),
    ("heap KiB", "heap-KiB/task", ".0f", 10, 1),
    ("gor", "goroutines/task", ".0f", 5, 1),
    ("rd thr", "read-threads/task", ".0f", 8, 1),
    ("procs", "procs/task", ".0f", 7, 1),
    ("procs RSS", "procs-RSS-KiB/task", ".0f", 11, 1),
    ("procs PSS", "procs-PSS-KiB/task", ".0f", 11, 1),
    ("procs USS", "procs-USS-KiB/task", ".0f", 11, 1),
])
print("(idle memory: per task; harness = VmRSS growth of the supervisor, procs = the runner/relay/init")
print(" processes that stay resident besides the command, PSS splitting the pages they share,")
print(" USS their private pages)")
print()

def target(label, value, ok, goal):
    if value is None:
        print(f"{label:<58} {'n/a':>8}   target {goal}")
    else:
        print(f"{label:<58} {value:>8.3f}   target {goal}: {'met' if ok(value) else 'MISSED'}")

print("== key figures")
target("spawn: run-workspace-write / bwrap (interleaved medians)",
       med("ExecutorSpawn/interleaved-run-bwrap", "x-bwrap"), lambda v: v <= 1, "<= 1")
target("spawn: run-workspace-write / bwrap (sequential)",
       med("ExecutorSpawn/run-workspace-write", "x-bwrap"), lambda v: v <= 1, "<= 1")
mbs = med("ExecutorOutput/run-workspace-write", "MB/s")
nsop = med("ExecutorOutput/run-workspace-write", "ns/op")
stream = "" if mbs is None else f" ({mbs * nsop / 1e3 / 2**20:.0f} MiB stream)"
target("output: run-workspace-write GB/s" + stream, None if mbs is None else mbs / 1000, lambda v: v >= 1,
       ">= 1 for 1 GiB")
target("output: run-workspace-write peak RSS growth MiB",
       med("ExecutorOutput/run-workspace-write", "peak-growth-MiB"),
       lambda v: v <= 16, "<= 16 (tails and read buffers, whatever the output size)")
cps = med("ExecutorThroughput/run-workspace-write", "cmds/s")
print(f"{'throughput: run-workspace-write cmds/s':<58} {fmt(cps, '.0f'):>8}   "
      f"(x bwrap {fmt(med('ExecutorThroughput/run-workspace-write', 'x-bwrap'), '.2f')})")
for mode in ("workspace-write", "danger-full-access"):
    n = "ExecutorIdleMemory/" + mode
    print(f"{'idle task, ' + mode + ': harness / procs PSS KiB':<58} "
          f"{fmt(med(n, 'harness-RSS-KiB/task'), '.0f'):>8} / {fmt(med(n, 'procs-PSS-KiB/task'), '.0f')}"
          f"   (read(2)-blocked threads per task: {fmt(med(n, 'read-threads/task'), '.0f')})")
EOF
