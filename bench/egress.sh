#!/usr/bin/env bash
# Benchmarks of the egress proxy (sandbox/internal/egress/bench_test.go):
#   BenchmarkThroughput      DSH_BENCH_EGRESS_BYTES (256M) per op from a loopback server:
#                            Direct, through a CONNECT tunnel (Proxy) and through SOCKS5
#   BenchmarkNewConnection   dial (+ CONNECT / SOCKS5 handshake) + 1-byte round trip + close
#   BenchmarkIdle            heap, RSS and goroutines of an idle Proxy with one Served
# then a table of medians over COUNT runs; x-direct is each tunnel's time per op over
# Direct's in the same run (above 1: slower than direct).
#
# Usage: bench/egress.sh            (from anywhere; needs Go and python3)
# Environment: COUNT (3), BENCHTIME (10x: throughput), CONN_BENCHTIME (2000x),
#              IDLE_BENCHTIME (3x), DSH_BENCH_EGRESS_BYTES (256M),
#              BENCH_OUT (bench/results: the raw `go test` output is kept there),
#              GO (go, or /usr/local/go/bin/go when go is not on PATH).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
count="${COUNT:-3}"
benchtime="${BENCHTIME:-10x}"
conn_benchtime="${CONN_BENCHTIME:-2000x}"
idle_benchtime="${IDLE_BENCHTIME:-3x}"
out_dir="${BENCH_OUT:-$repo/bench/results}"

die() { echo "egress.sh: $*" >&2; exit 1; }

go="${GO:-}"
if [ -z "$go" ]; then
  if command -v go >/dev/null 2>&1; then go=go; else go=/usr/local/go/bin/go; fi
fi
"$go" version >/dev/null 2>&1 || die "Go not found (set GO, or install Go 1.26 in /usr/local/go)"
command -v python3 >/dev/null 2>&1 || die "python3 not found"
mkdir -p "$out_dir" 2>/dev/null || out_dir="${TMPDIR:-/tmp}"
raw="$out_dir/egress-$(date +%Y%m%d-%H%M%S).txt"

echo "== host"
echo "kernel: $(uname -sr); cpus: $(nproc); $("$go" version)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "(the figures move with any other load on the machine: compare ratios, from one run)"
echo

run() { # benchtime regexp
  (cd "$repo" && "$go" test -run '^$' -bench "$2" -benchtime "$1" -count "$count" -timeout 60m ./sandbox/internal/egress/)
}
echo "== go test -bench (raw output: $raw)"
{
  run "$benchtime" '^BenchmarkThroughput$'
  run "$conn_benchtime" '^BenchmarkNewConnection$'
  run "$idle_benchtime" '^BenchmarkIdle$'
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
    name, fields = m.group(1)[len("Benchmark"):], m.group(2 + 1).split()
    if name not in runs:
        order.append(name)
    for value, unit in zip(fields[0::2], fields[1::2]):
        try:
            runs[name][unit].append(float(value))
        except ValueError:
            pass
units = ["ns/op", "MB/s", "x-direct", "heap-B/served", "rss-KiB/served", "goroutines/served"]
print("| benchmark | " + " | ".join(units) + " |")
print("|---" * (len(units) + 1) + "|")
for name in order:
    cells = []
    for u in units:
        v = runs[name].get(u)
        cells.append(f"{statistics.median(v):.4g}" if v else "")
    print(f"| {name} | " + " | ".join(cells) + " |")
EOF
