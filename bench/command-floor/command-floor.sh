#!/usr/bin/env bash
# The floor of one dsh-sandbox command (issue 30): builds bench/command-floor/command-floor.c
# with gcc -O2, extracts dsh's own seccomp program from the repository, and
# runs command-floor against bubblewrap's upstream profile, interleaved, on this
# machine. See bench/command-floor/README.md for what each variant does and how to
# read the tables.
#
# Usage: bench/command-floor/command-floor.sh [command-floor options...]   (as root)
#   e.g. bench/command-floor/command-floor.sh -n 500      more commands per variant
#        bench/command-floor/command-floor.sh -k          check: each variant once, no timing
# Environment:
#   CC (gcc), OUT (also write the output to this file),
#   HYPERFINE=1 also time bare and bwrap with hyperfine (RUNS, 300) as a
#   cross-check of command-floor.c's own loop.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
die() { echo "command-floor.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (the project's CI does; the cgroup and mount steps need it)"
cc="${CC:-gcc}"
for tool in "$cc" bwrap python3; do
  command -v "$tool" >/dev/null 2>&1 || die "missing tool: $tool (apt-get install -y bubblewrap hyperfine python3 gcc)"
done

work="$(mktemp -d "${TMPDIR:-/tmp}/dsh-command-floor-build.XXXXXX")"
ws="$(mktemp -d /tmp/dsh-command-floor-ws.XXXXXX)"
trap 'rm -rf "$work" "$ws"' EXIT

"$cc" -O2 -Wall -Wextra -pthread -o "$work/command-floor" "$here/command-floor.c"

# dsh's seccomp program for workspace-write: the one its runner loads with a
# mount view (user notification on, network off with a net namespace of the
# command's own: seccomp.Spec{Notify, Inet}), as embedded, raw BPF.
filter=()
if python3 - "$repo/sandbox/seccomp/programs_linux_amd64.go" "$work/dsh-filter.bpf" <<'PY'
import ast, re, sys
want = "{Network:false Notify:true DenyTruncate:false DenyIoctlOpen:false Signals:false Inet:true Metadata:false OwnAddress:false}"
src = open(sys.argv[1]).read()
for m in re.finditer(r'^\t(\d+):\s+"((?:[^"\\]|\\.)*)",\s*//\s*(\{.*\})\s*$', src, re.M):
    if m.group(3) == want:
        prog = ast.literal_eval('b"' + m.group(2) + '"')  # Go's escapes here are Python's too
        open(sys.argv[2], "wb").write(prog)
        sys.exit(0)
sys.exit(1)
PY
then
  filter=(-F "$work/dsh-filter.bpf")
else
  echo "command-floor.sh: dsh's seccomp program not found in sandbox/seccomp/programs_linux_amd64.go: using command-floor.c's synthetic one" >&2
fi

run() {
  echo "== host"
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "uptime: $(uptime)"
  echo "kernel: $(uname -sr); cpus: $(nproc); user: $(id -un); $(bwrap --version); bash: $(/bin/bash -c 'echo $BASH_VERSION')"
  echo
  "$work/command-floor" -w "$ws" "${filter[@]}" "$@"
  if [ "${HYPERFINE:-0}" = 1 ] && command -v hyperfine >/dev/null 2>&1; then
    echo
    echo "== hyperfine cross-check (bare, bwrap)"
    hyperfine -N --warmup 20 --runs "${RUNS:-300}" --style basic \
      "/bin/bash -c true" \
      "bwrap --ro-bind / / --dev /dev --proc /proc --die-with-parent --tmpfs /tmp --bind $ws $ws -- /bin/bash -c true"
  fi
  echo
  echo "uptime after: $(uptime)"
}

if [ -n "${OUT:-}" ]; then
  run "$@" 2>&1 | tee "$OUT"
else
  run "$@"
fi
