#!/usr/bin/env bash
# The cost of the toolchain caches' overlays: the median wall time of
#   go build, cold    a small module (fmt, encoding/json, strings), every cache empty
#   go build, warm    the same with the user's build cache warm (the sandbox's own empty)
#   npm install, cold a local tarball into a fresh node_modules, ~/.npm empty
#   npm install, warm the same with ~/.npm holding the tarball's entry already
# each bare (HOME=H bash -c CMD) and under dsh-sandbox-run --mode workspace-write (dsh: the
# caches of H through their overlays), interleaved round by round; then a table of medians
# and each dsh figure's ratio to bare from the same run.
#
# H is a fresh home under /var/tmp (outside every writable root), removed on exit. Before each
# timed run (untimed): the build output and node_modules go; for a cold run the user's cache
# and the sandbox's store are emptied (`dsh-sandbox-run caches clean`), for a warm one only
# the store (the user's cache stays warm: the sandbox reads it through the overlay).
#
# Usage: bench/caches.sh      (uses bin/dsh-sandbox-run of this repository)
# Environment: ROUNDS (3), DSH_BIN, GO, BENCH_OUT (bench/results: the raw times as CSV).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${DSH_BIN:-$repo/bin/dsh-sandbox-run}"
# shellcheck source=bench/lib.sh
. "$repo/bench/lib.sh"
out_dir="${BENCH_OUT:-$repo/bench/results}"

die() { echo "caches.sh: $*" >&2; exit 1; }
rounds="${ROUNDS:-3}"
case "$rounds" in '' | *[!0-9]* | 0*) die "ROUNDS must be a positive integer (got '$rounds')" ;; esac
find_go
for tool in npm node python3 tar; do
  command -v "$tool" >/dev/null 2>&1 || die "missing tool: $tool (make test-deps)"
done
[ -x "$bin" ] || die "$bin not found or not executable (run make build first)"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
go="$(command -v "$go")"
if ! mkdir -p "$out_dir" 2>/dev/null || [ ! -w "$out_dir" ]; then
  out_dir="${TMPDIR:-/tmp}"
fi
csv="$out_dir/caches-$(date +%Y%m%d-%H%M%S).csv"

root="$(mktemp -d /var/tmp/dsh-bench-caches.XXXXXX)"
root="$(cd "$root" && pwd -P)"
trap 'chmod -R u+rwX "$root" 2>/dev/null; rm -rf "$root"' EXIT
chmod 755 "$root"

echo "== host"
echo "kernel: $(uname -r); cpus: $(nproc); user: $(id -un) (uid $(id -u)); $("$go" version); node $(node --version); npm $(npm --version)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
print_probe "$bin"

home="$root/home"
mkdir -p "$home/.cache" "$root/gows" "$root/npmws" "$root/pkg"
cat >"$root/gows/go.mod" <<'EOF'
module example.com/bench

go 1.21
EOF
cat >"$root/gows/main.go" <<'EOF'
package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

func main() {
	b, _ := json.Marshal(map[string]string{"a": strings.ToUpper("b")})
	fmt.Println(string(b))
}
EOF
echo '{"name":"benchpkg","version":"1.0.0","main":"index.js"}' >"$root/pkg/package.json"
echo 'exports.hi = "hi";' >"$root/pkg/index.js"
tar -czf "$root/npmws/benchpkg-1.0.0.tgz" -C "$root/pkg" --transform 's,^\.,package,' .
echo '{"name":"app","version":"1.0.0"}' >"$root/npmws/package.json"

export BENCH_ROOT="$root" BENCH_HOME="$home" BENCH_BIN="$bin" BENCH_GO="$go" BENCH_ROUNDS="$rounds" BENCH_CSV="$csv"
python3 - <<'PY'
import csv, os, shutil, statistics, subprocess, time

root, home, bin_, go = os.environ["BENCH_ROOT"], os.environ["BENCH_HOME"], os.environ["BENCH_BIN"], os.environ["BENCH_GO"]
rounds = int(os.environ["BENCH_ROUNDS"])
env = {"PATH": os.path.dirname(go) + ":/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C",
       "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod", "GOPROXY": "off", "CGO_ENABLED": "0", "GOTELEMETRY": "off"}
gows, npmws = os.path.join(root, "gows"), os.path.join(root, "npmws")
go_cmd = go + " build -o prog ."
npm_cmd = "npm install --offline --no-audit --no-fund --no-update-notifier ./benchpkg-1.0.0.tgz >/dev/null"

def empty(d):
    if os.path.isdir(d):
        subprocess.run(["chmod", "-R", "u+rwX", d], check=False)
        shutil.rmtree(d)
    os.makedirs(d, exist_ok=True)

def clean_store():
    subprocess.run([bin_, "caches", "clean"], env=env, check=True, stdout=subprocess.DEVNULL)

def sh(ws, cmd, variant):
    argv = ["bash", "-c", cmd]
    if variant == "dsh":
        argv = [bin_, "--mode", "workspace-write", "--workspace", ws, "--"] + argv
    return argv

def prep(work, warm):
    ws = gows if work.startswith("go") else npmws
    for p in ("prog", "node_modules", "package-lock.json"):
        p = os.path.join(ws, p)
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)
    with open(os.path.join(npmws, "package.json"), "w") as f:
        f.write('{"name":"app","version":"1.0.0"}')
    clean_store()
    if not warm:
        empty(os.path.join(home, ".cache", "go-build") if work.startswith("go") else os.path.join(home, ".npm"))

def warmup(work):
    ws, cmd = (gows, go_cmd) if work.startswith("go") else (npmws, npm_cmd)
    subprocess.run(sh(ws, cmd, "bare"), cwd=ws, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

works = [("go build, cold", False), ("go build, warm", True), ("npm install, cold", False), ("npm install, warm", True)]
variants = ["bare", "dsh"]
times = {(w, v): [] for w, _ in works for v in variants}
rows = []
for r in range(rounds):
    for i, (work, warm) in enumerate(works):
        order = variants if (r + i) % 2 == 0 else variants[::-1]
        for v in order:
            if warm:
                warmup(work)
            prep(work, warm)
            ws, cmd = (gows, go_cmd) if work.startswith("go") else (npmws, npm_cmd)
            t0 = time.perf_counter_ns()
            p = subprocess.run(sh(ws, cmd, v), cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            dt = (time.perf_counter_ns() - t0) / 1e6
            if p.returncode != 0:
                raise SystemExit(f"caches.sh: {work} ({v}) failed: {p.stderr.decode()[-400:]}")
            times[(work, v)].append(dt)
            rows.append((r, work, v, f"{dt:.1f}"))
with open(os.environ["BENCH_CSV"], "w", newline="") as f:
    csv.writer(f).writerows([("round", "workload", "variant", "ms")] + rows)
print(f"== medians of {rounds} rounds (ms); raw times: {os.environ['BENCH_CSV']}")
print(f"{'workload':<20} {'bare':>10} {'dsh':>10} {'dsh/bare':>9}")
for work, _ in works:
    b, d = statistics.median(times[(work, 'bare')]), statistics.median(times[(work, 'dsh')])
    print(f"{work:<20} {b:>10.1f} {d:>10.1f} {d / b:>9.2f}")
PY
