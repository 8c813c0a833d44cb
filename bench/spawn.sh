#!/usr/bin/env bash
# Spawn overhead of dsh-sandbox-run: median wall time of `bash -c true`
#   (a) bare,
#   (b) under dsh-sandbox-run --mode workspace-write,
#   (c) under bubblewrap with its usual profile,
#   (d) under dsh-sandbox-run --mode read-only,
#   (e) under dsh-sandbox-run --mode workspace-write --network,
# all in one hyperfine run, then a table of medians and ratios.
#
# Usage: bench/spawn.sh            (from anywhere; uses bin/dsh-sandbox-run of this repository)
# Environment: RUNS (300), WARMUP (20), DSH_BIN (bin/dsh-sandbox-run),
#              BENCH_OUT (bench/results: hyperfine's JSON is kept there),
#              BENCH_EXTRA=0 to leave out (d) and (e).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${DSH_BIN:-$repo/bin/dsh-sandbox-run}"
# shellcheck source=bench/lib.sh
. "$repo/bench/lib.sh"
runs="${RUNS:-300}"
warmup="${WARMUP:-20}"
out_dir="${BENCH_OUT:-$repo/bench/results}"
extra="${BENCH_EXTRA:-1}"

die() { echo "spawn.sh: $*" >&2; exit 1; }

missing=()
for tool in hyperfine bwrap bash python3; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
  die "missing tool(s): ${missing[*]} (make bench-deps installs bubblewrap and hyperfine; python3 reads hyperfine's JSON)"
fi
[ -x "$bin" ] || die "$bin not found or not executable (run make build first)"

bash_path="$(command -v bash)"
ws="$(mktemp -d "${TMPDIR:-/tmp}/dsh-bench-ws.XXXXXX")"
ws="$(cd "$ws" && pwd -P)"
trap 'rm -rf "$ws"' EXIT
if ! mkdir -p "$out_dir" 2>/dev/null || [ ! -w "$out_dir" ]; then
  out_dir="${TMPDIR:-/tmp}"
fi
json="$out_dir/spawn-$(date +%Y%m%d-%H%M%S).json"

# hyperfine -N splits each command like a shell would: quote paths.
q() { printf "'%s'" "$1"; }
case "$ws$bin$bash_path" in *"'"*) die "paths with a single quote are not supported" ;; esac

cmd_bare="$(q "$bash_path") -c true"
cmd_ws="$(q "$bin") --mode workspace-write --workspace $(q "$ws") -- $(q "$bash_path") -c true"
cmd_bwrap="bwrap --ro-bind / / --dev /dev --proc /proc --die-with-parent --tmpfs /tmp --bind $(q "$ws") $(q "$ws") -- $(q "$bash_path") -c true"
cmd_ro="$(q "$bin") --mode read-only --workspace $(q "$ws") -- $(q "$bash_path") -c true"
cmd_net="$(q "$bin") --mode workspace-write --network --workspace $(q "$ws") -- $(q "$bash_path") -c true"
# (f) bwrap with the namespaces dsh-sandbox-run creates (user, mount, pid, net, ipc, uts):
# the same isolation by namespaces, still without Landlock, seccomp or a supervisor.
cmd_bwrap_all="bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc --die-with-parent --tmpfs /tmp --bind $(q "$ws") $(q "$ws") -- $(q "$bash_path") -c true"

echo "== host"
echo "kernel: $(uname -sr); cpus: $(nproc); user: $(id -un) (uid $(id -u))"
echo "$(hyperfine --version); $(bwrap --version)"
echo
print_probe "$bin"

# One untimed run of each, so a broken setup is reported plainly instead of as a hyperfine error.
names=() cmds=()
add() { names+=("$1"); cmds+=("$2"); }
preflight() { # name command...
  local name="$1" err; shift
  if ! err="$("$@" 2>&1 >/dev/null)"; then
    echo "spawn.sh: preflight of ($name) failed: $* :" >&2
    printf '%s\n' "$err" | sed 's/^/  /' >&2
    return 1
  fi
}
preflight "bare" "$bash_path" -c true || die "bash -c true failed"
add "bare" "$cmd_bare"
preflight "dsh workspace-write" "$bin" --mode workspace-write --workspace "$ws" -- "$bash_path" -c true \
  || die "dsh-sandbox-run cannot run here (see above)"
add "dsh workspace-write" "$cmd_ws"
if preflight "bwrap" bwrap --ro-bind / / --dev /dev --proc /proc --die-with-parent --tmpfs /tmp \
     --bind "$ws" "$ws" -- "$bash_path" -c true; then
  add "bwrap" "$cmd_bwrap"
else
  echo "spawn.sh: bubblewrap cannot run here (e.g. user namespaces restricted); (c) left out" >&2
fi
if [ "$extra" != 0 ]; then
  preflight "dsh read-only" "$bin" --mode read-only --workspace "$ws" -- "$bash_path" -c true \
    && add "dsh read-only" "$cmd_ro"
  preflight "dsh workspace-write --network" "$bin" --mode workspace-write --network --workspace "$ws" -- "$bash_path" -c true \
    && add "dsh workspace-write --network" "$cmd_net"
  preflight "bwrap --unshare-all" bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc --die-with-parent --tmpfs /tmp \
    --bind "$ws" "$ws" -- "$bash_path" -c true \
    && add "bwrap --unshare-all" "$cmd_bwrap_all"
fi

hf_args=(-N --warmup "$warmup" --runs "$runs" --export-json "$json")
for i in "${!names[@]}"; do
  hf_args+=(--command-name "${names[$i]}" "${cmds[$i]}")
done

echo "== hyperfine (${#names[@]} commands, $warmup warmup + $runs runs each)"
(cd "$ws" && hyperfine "${hf_args[@]}")
echo

echo "== medians (hyperfine JSON: $json)"
python3 - "$json" <<'EOF'
import json, sys

with open(sys.argv[1]) as f:
    results = json.load(f)["results"]
by_name = {r["command"]: r for r in results}
ms = lambda s: s * 1000.0
bare = by_name.get("bare")

print(f"{'command':<32} {'median ms':>10} {'mean ms':>9} {'stddev':>8} {'min ms':>8} {'x bare':>7}")
for r in results:
    ratio = r["median"] / bare["median"] if bare else float("nan")
    print(f"{r['command']:<32} {ms(r['median']):>10.2f} {ms(r['mean']):>9.2f} "
          f"{ms(r['stddev'] or 0):>8.2f} {ms(r['min']):>8.2f} {ratio:>7.2f}")

ws, bw = by_name.get("dsh workspace-write"), by_name.get("bwrap")
if ws and bw:
    print(f"\ndsh workspace-write / bwrap (medians): {ws['median'] / bw['median']:.2f}")
bwa = by_name.get("bwrap --unshare-all")
if ws and bwa:
    print(f"dsh workspace-write / bwrap --unshare-all (medians): {ws['median'] / bwa['median']:.2f}")
if ws and bare:
    print(f"dsh workspace-write overhead over bare (medians): {ms(ws['median'] - bare['median']):.2f} ms")
EOF
