#!/usr/bin/env bash
# Benchmarks of the egress proxy (sandbox/internal/egress/bench_test.go):
#   BenchmarkThroughput      DSH_BENCH_EGRESS_BYTES (256M) per op from a loopback server:
#                            Direct, through a CONNECT tunnel (Proxy) and through SOCKS5
#   BenchmarkNewConnection   dial (+ CONNECT / SOCKS5 handshake) + 1-byte round trip + close
#   BenchmarkIdle            heap, RSS and goroutines of an idle Proxy with one Served
# then a table of medians over COUNT runs; x-direct is each tunnel's time per op over
# Direct's in the same run (above 1: slower than direct). Then the same end to end, through
# dsh-sandbox-run (bin/, built by make build): curl in the sandbox downloads E2E_BYTES (1G)
# from a loopback server with --network (direct) and through the egress proxy
# (--allow-domain; plain HTTP forwarding, and a CONNECT tunnel as HTTPS uses), interleaved,
# and makes E2E_CONNS (200) new connections each way.
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

# shellcheck source=bench/lib.sh
. "$repo/bench/lib.sh"
find_go
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

echo
echo "== end to end: curl inside dsh-sandbox-run, --network (direct) against --allow-domain (proxy)"
bin="$repo/bin/dsh-sandbox-run"
[ -x "$bin" ] || die "$bin not built (make build)"
command -v curl >/dev/null 2>&1 || die "curl not found"
e2e_bytes="${E2E_BYTES:-1G}"
e2e_conns="${E2E_CONNS:-200}"
work="$(mktemp -d)"
trap 'kill "$srv" 2>/dev/null; rm -rf "$work"' EXIT
truncate -s "$e2e_bytes" "$work/big"
echo small > "$work/small"
# A loopback server that sends files with sendfile(2), so that it is never the bottleneck.
python3 - "$work" > "$work/port" <<'PY' &
import http.server, os, socketserver, sys
os.chdir(sys.argv[1])
class H(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def log_message(self, *a): pass
    def copyfile(self, src, dst):
        os.sendfile(self.connection.fileno(), src.fileno(), 0, os.fstat(src.fileno()).st_size)
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
srv=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
port="$(cat "$work/port")"
[ -n "$port" ] || die "the loopback server did not start"
direct=(--mode workspace-write --workspace "$work" --network)
proxied=(--mode workspace-write --workspace "$work" --allow-domain bench.test --allow-domain 127.0.0.1 --resolve bench.test=127.0.0.1)
speed() { # flags... -- url
  "$bin" "$@" 2>/dev/null | tail -n1
}
conns_script="for i in \$(seq $e2e_conns); do curl -s -o /dev/null URL; done"
results="$work/results"
for round in $(seq "$count"); do
  d="$("$bin" "${direct[@]}" -- curl -s -o /dev/null -w '%{speed_download}' "http://127.0.0.1:$port/big")"
  p="$("$bin" "${proxied[@]}" -- curl -s -o /dev/null -w '%{speed_download}' "http://bench.test:$port/big")"
  tn="$("$bin" "${proxied[@]}" -- curl -s -p -o /dev/null -w '%{speed_download}' "http://bench.test:$port/big")"
  t0=$(date +%s%N); "$bin" "${direct[@]}" -- bash -c "${conns_script//URL/http://127.0.0.1:$port/small}"; t1=$(date +%s%N)
  "$bin" "${proxied[@]}" -- bash -c "${conns_script//URL/http://bench.test:$port/small}"; t2=$(date +%s%N)
  echo "$d $p $(( (t1 - t0) / e2e_conns / 1000 )) $(( (t2 - t1) / e2e_conns / 1000 )) $tn" >> "$results"
done
python3 - "$results" "$e2e_bytes" "$e2e_conns" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
med = lambda i: statistics.median(r[i] for r in rows)
d, p, cd, cp, tn = med(0), med(1), med(2), med(3), med(4)
print(f"| download {sys.argv[2]}, plain HTTP forwarding | direct {d/1e6:.0f} MB/s | proxy {p/1e6:.0f} MB/s | proxy/direct {p/d:.2f} |")
print(f"| download {sys.argv[2]}, CONNECT tunnel (curl -p) | direct {d/1e6:.0f} MB/s | proxy {tn/1e6:.0f} MB/s | proxy/direct {tn/d:.2f} |")
print(f"| curl, new connection each ({sys.argv[3]}) | direct {cd:.0f} us | proxy {cp:.0f} us | added {cp-cd:.0f} us per connection |")
PY
