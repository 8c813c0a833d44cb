#!/usr/bin/env bash
# integration/vm/run.sh — boot a Debian kernel in QEMU and run the integration tests inside it.
# Used by `make vm-test`; every variable has a default:
#
#   KERNEL=6.1|6.12     the Debian kernel series (6.1: Landlock ABI 2; 6.12: ABI 6)
#   KERNEL_PKG=...      an exact linux-image package instead of the newest of the series
#   PKGS="./..."        the packages whose tests run in the VM (default: every package with tests)
#   RUN=regex (TESTS=)  go test -run for every package (default: all tests)
#   SKIP=regex          go test -skip for every package (default: none)
#   GO_TEST_TIMEOUT=... go test -timeout per package inside the VM (default 65m)
#   TIME_SCALE=N        DSH_TEST_TIME_SCALE in the guest: tests multiply their deadlines by N
#                       (default 10 under TCG, 2 under KVM)
#   VM_TIMEOUT=...      hard limit for the whole QEMU run, seconds (default: go test's + 300)
#   VM_MEM / VM_SMP     guest memory (MiB, 2048) and CPUs (2)
#   VM_CACHE=dir        downloads, unpacked kernels, initramfs, runs (integration/vm/.cache)
#
# The guest: the host's root read-only over 9p under a tmpfs overlay (so the host's Go, module
# and build caches, /etc/passwd with dshtest, the worktree are all there), /tmp on a fresh ext4
# disk, /var/tmp on another, fresh tmpfs /run, /dev/shm, and a writable 9p share "results" (the run directory) that receives
# the go test output. Tests are run by a root test process (its "root" and "user" subtests, the
# user being dshtest) with DSH_REQUIRE_LANDLOCK=1 CI=true. Exit status: 0 when go test passed,
# 1 when it failed, 2 when the VM did not produce a result (boot failure, timeout).
set -euo pipefail
# The whole script is one compound command, read before it runs: editing this file while a VM
# runs (for an hour) cannot change what the running copy does next.
{

KERNEL=${KERNEL:-6.1}
PKGS=${PKGS:-./...}
RUN=${RUN:-${TESTS:-.}}
SKIP=${SKIP:-}
GO_TEST_TIMEOUT=${GO_TEST_TIMEOUT:-65m}
VM_MEM=${VM_MEM:-2048}
VM_SMP=${VM_SMP:-2}
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
VM_CACHE=${VM_CACHE:-$here/.cache}
GO=${GO:-go}
command -v "$GO" >/dev/null 2>&1 || PATH=/usr/local/go/bin:$PATH

log() { printf 'vm-test: %s\n' "$*" >&2; }
die() { log "$*"; exit 2; }

for tool in qemu-system-x86_64 dpkg-deb depmod cpio gzip apt-get apt-cache timeout mkfs.ext4; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (make vm-deps installs what is needed)"
done
mkdir -p "$VM_CACHE"

# ---- kernel: newest linux-image of the series known to apt (generic flavour: cloud has no 9p)
if [ -z "${KERNEL_PKG:-}" ]; then
  case "$KERNEL" in
    6.1) pattern='^linux-image-6\.1\.0-[0-9]+-amd64$' ;;
    6.12) pattern='^linux-image-6\.12\.[0-9]+\+deb12-amd64$' ;;
    *) die "KERNEL=$KERNEL: expected 6.1 or 6.12 (or set KERNEL_PKG)" ;;
  esac
  KERNEL_PKG="$(apt-cache search --names-only "$pattern" | cut -d' ' -f1 | sort -V | tail -n1)"
  if [ -z "$KERNEL_PKG" ] && [ "$(id -u)" = 0 ]; then
    log "no $pattern in apt's lists: apt-get update"
    apt-get update -qq || true
    KERNEL_PKG="$(apt-cache search --names-only "$pattern" | cut -d' ' -f1 | sort -V | tail -n1)"
  fi
  [ -n "$KERNEL_PKG" ] || die "no package matches $pattern (run apt-get update; bookworm-security for 6.12)"
fi
kdir="$VM_CACHE/$KERNEL_PKG"
if [ ! -f "$kdir/.ready" ]; then
  log "downloading $KERNEL_PKG"
  rm -rf "$kdir"; mkdir -p "$kdir/dl"
  (cd "$kdir/dl" && apt-get download -q "$KERNEL_PKG") || die "apt-get download $KERNEL_PKG failed"
  deb="$(find "$kdir/dl" -name '*.deb' | head -n1)"
  [ -n "$deb" ] || die "apt-get download $KERNEL_PKG produced no .deb"
  dpkg-deb -x "$deb" "$kdir/root"
  rm -f "$deb"
  kver="$(ls "$kdir/root/lib/modules")"
  depmod -b "$kdir/root" "$kver"
  "$here/build-initramfs.sh" "$kdir/root" "$kdir/initrd.gz"
  touch "$kdir/.ready"
fi
kver="$(ls "$kdir/root/lib/modules")"
vmlinuz="$kdir/root/boot/vmlinuz-$kver"
[ -f "$vmlinuz" ] || die "no $vmlinuz"
if [ "$here/init.sh" -nt "$kdir/initrd.gz" ] || [ "$here/build-initramfs.sh" -nt "$kdir/initrd.gz" ]; then
  "$here/build-initramfs.sh" "$kdir/root" "$kdir/initrd.gz"
fi

# ---- the run directory (the guest's /results) and the binaries, built on the host
run="$VM_CACHE/runs/$KERNEL-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$run/bin"
chmod 0755 "$VM_CACHE" "$VM_CACHE/runs" "$run" "$run/bin"
log "building the test binaries on the host ($run/bin)"
# one test binary per package with tests, run in the guest from the package's directory (as go
# test does); the integration suite's helpers prebuilt too (DSH_IT_BIN), so the guest builds nothing
: >"$run/packages"
(
  cd "$root"
  CGO_ENABLED=1 "$GO" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' $PKGS |
    while read -r pkg dir; do
      [ -n "$pkg" ] || continue
      name="$(echo "${pkg#github.com/dsh-sandbox/dsh-sandbox}" | tr / _ | sed 's/^_//;s/^$/root/').test"
      CGO_ENABLED=1 "$GO" test -c -o "$run/bin/$name" "$pkg"
      echo "$pkg $dir $name" >>"$run/packages"
    done
  CGO_ENABLED=1 "$GO" build -o "$run/bin/dsh-sandbox-run" ./cmd/dsh-sandbox-run
  CGO_ENABLED=1 "$GO" build -o "$run/bin/dsh-sandbox-mcp" ./cmd/dsh-sandbox-mcp
  CGO_ENABLED=1 "$GO" build -o "$run/bin/degrade" ./integration/internal/degrade
  CGO_ENABLED=1 "$GO" build -o "$run/bin/harness" ./integration/internal/harness
  CGO_ENABLED=1 "$GO" build -o "$run/bin/toolrepl" ./examples/toolrepl
  CGO_ENABLED=1 "$GO" build -o "$run/bin/rawcmd" ./integration/internal/rawcmd
  CGO_ENABLED=0 "$GO" build -o "$run/bin/racer" ./integration/internal/racer
  CGO_ENABLED=0 "$GO" build -o "$run/bin/gounix" ./integration/internal/gounix
) || die "building the test binaries failed"
[ -s "$run/packages" ] || die "PKGS=$PKGS: no package with tests"
# The guest has no network: the TypeScript MCP SDK that cmd/dsh-sandbox-mcp's real-client test
# runs is installed here (the version its test pins), cached across runs, and copied into the run
# (DSH_MCP_TS_CACHE), where the test finds it installed. No npm here: the guest's test says so.
ts_cache=""
if grep -q '^github.com/dsh-sandbox/dsh-sandbox/cmd/dsh-sandbox-mcp ' "$run/packages" && command -v npm >/dev/null 2>&1; then
  ts_version="$(sed -n 's/^const tsSDKVersion = "\(.*\)"$/\1/p' "$root/cmd/dsh-sandbox-mcp/binary_linux_test.go")"
  [ -n "$ts_version" ] || die "cannot read tsSDKVersion from cmd/dsh-sandbox-mcp/binary_linux_test.go"
  ts_host="$VM_CACHE/mcp-ts-sdk-$ts_version"
  if [ ! -f "$ts_host/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
    log "installing @modelcontextprotocol/sdk@$ts_version for the guest ($ts_host)"
    npm install --no-audit --no-fund --loglevel=error --prefix "$ts_host" "@modelcontextprotocol/sdk@$ts_version" ||
      die "npm install @modelcontextprotocol/sdk@$ts_version failed"
  fi
  ts_cache="$run/mcp-ts-sdk"
  cp -a "$ts_host" "$ts_cache"
  cp "$root"/cmd/dsh-sandbox-mcp/testdata/*.mjs "$ts_cache/"
  chmod -R a+rX "$ts_cache"
fi
chmod 0755 "$run/bin"/*

case "$GO_TEST_TIMEOUT" in
  *m) go_timeout_s=$(( ${GO_TEST_TIMEOUT%m} * 60 )) ;;
  *s) go_timeout_s=${GO_TEST_TIMEOUT%s} ;;
  *) die "GO_TEST_TIMEOUT=$GO_TEST_TIMEOUT: expected <N>m or <N>s" ;;
esac
# the whole VM: boot + probes + go test + margin, unless VM_TIMEOUT says otherwise
case "${VM_ACCEL:-tcg}" in
  kvm) TIME_SCALE=${TIME_SCALE:-2} ;;
  *) TIME_SCALE=${TIME_SCALE:-10} ;;
esac
# the whole VM: boot + probes + every package's tests + margin, unless VM_TIMEOUT says otherwise
VM_TIMEOUT=${VM_TIMEOUT:-$((go_timeout_s + 600))}
gobin="$(dirname "$(command -v "$GO")")"
# what the guest must see of the host under directories it mounts fresh (init.sh binds them)
printf '%s\n' "$root" >"$run/host-paths"
# the guest kernel's modules, where a real host keeps them, so that the kernel loads on demand what
# it does on such a host (unix_diag for sock_diag, say: the supervisor's check of a socket it bound)
printf '%s\n' "$kdir/root/lib/modules/$kver" >"$run/modules-dir"
npkgs=$(wc -l <"$run/packages")
cat >"$run/guest.sh" <<GUEST
#!/bin/bash
# Runs as PID 1 in the VM (written by integration/vm/run.sh); always powers off.
export PATH=$gobin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root GOFLAGS=-mod=readonly GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=1
export DSH_REQUIRE_LANDLOCK=1 DSH_TEST_USER=dshtest CI=true
export DSH_SANDBOX_RUN=$run/bin/dsh-sandbox-run DSH_IT_BIN=$run/bin DSH_TEST_TIME_SCALE=$TIME_SCALE
${ts_cache:+export DSH_MCP_TS_CACHE=$ts_cache}
finish() { sync; echo o >/proc/sysrq-trigger; sleep 5; poweroff -f; }
trap finish EXIT
ip link set lo up 2>/dev/null
hostname dsh-vm
echo "vm-guest: up after \$(cut -d' ' -f1 /proc/uptime) s; kernel \$(uname -r)" | tee /results/boot.txt
# the probe takes its working directory as the workspace (and audits the .git under it): not /
mkdir -p /tmp/probe && chmod 0777 /tmp/probe && cd /tmp/probe || exit
{
  # bounded: SIGQUIT after 60 s makes a stuck Go process print its goroutines
  echo "== dsh-sandbox-run --probe (root)"
  timeout -s QUIT -k 10 60 \$DSH_SANDBOX_RUN --probe; echo "rc=\$?"
  echo "== dsh-sandbox-run --probe (dshtest)"
  timeout -s QUIT -k 10 60 setpriv --reuid=dshtest --regid=dshtest --init-groups env HOME=/home/dshtest \$DSH_SANDBOX_RUN --probe; echo "rc=\$?"
} >/results/probe.txt 2>&1
cat /results/probe.txt
rc=0
: >/results/go-test.txt
[ -r $run/packages ] || { echo "vm-guest: cannot read $run/packages: no test can run"; rc=1; }
while read -r pkg dir name; do
  start=\$(cut -d' ' -f1 /proc/uptime)
  echo "=== package \$pkg" >>/results/go-test.txt
  (cd "\$dir" && timeout -s QUIT -k 30 $((go_timeout_s + 60)) $run/bin/\$name -test.v -test.count=${VM_COUNT:-1} -test.timeout $GO_TEST_TIMEOUT -test.run '$RUN' ${SKIP:+-test.skip '$SKIP'}) >>/results/go-test.txt 2>&1
  prc=\$?
  took=\$(awk -v s=\$start '{ print \$1 - s }' /proc/uptime)
  if [ "\$prc" = 0 ]; then echo "ok   \$pkg \${took}s" >>/results/go-test.txt; else echo "FAIL \$pkg \${took}s (exit \$prc)" >>/results/go-test.txt; rc=1; fi
  echo "vm-guest: \$pkg exited \$prc after \$took s"
done <$run/packages
echo "\$rc" >/results/go-test.rc
echo "vm-guest: every package done, status \$rc"
GUEST
chmod 0755 "$run/guest.sh"

# ---- boot, bounded by VM_TIMEOUT. TCG by default: this machine class has a /dev/kvm that cannot
# run a normal guest; VM_ACCEL=kvm where KVM works.
case "${VM_ACCEL:-tcg}" in
  kvm) accel=kvm ;;
  tcg) accel="tcg,thread=multi" ;;
  *) die "VM_ACCEL=${VM_ACCEL}: expected tcg or kvm" ;;
esac
log "booting $kver ($accel, ${VM_SMP} CPUs, ${VM_MEM} MiB), limit ${VM_TIMEOUT}s; console in $run/console.txt"
# The guest's /tmp and /var/tmp: fresh ext4 disks (sparse), as a real host's on disk (init.sh).
# Two filesystems, not one: a transaction's directory must lie outside every writable root, /tmp
# among them, and on a filesystem that keeps user.* xattrs (tmpfs does only from Linux 6.6).
disk="$run/tmp.ext4" vardisk="$run/var-tmp.ext4"
for d in "$disk" "$vardisk"; do
  truncate -s 16G "$d"
  mkfs.ext4 -q -F "$d"
done
t0=$(date +%s)
set +e
timeout -k 10 "$VM_TIMEOUT" qemu-system-x86_64 \
  -accel "$accel" -cpu max -smp "$VM_SMP" -m "$VM_MEM" -nographic -no-reboot \
  -kernel "$vmlinuz" -initrd "$kdir/initrd.gz" \
  -append "console=ttyS0 panic=-1 quiet" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$run,mount_tag=results,security_model=none" \
  -drive "file=$disk,if=virtio,format=raw,cache=unsafe" \
  -drive "file=$vardisk,if=virtio,format=raw,cache=unsafe" \
  -nic none </dev/null 2>&1 | tee "$run/console.txt"
qrc=${PIPESTATUS[0]}
set -e
rm -f "$disk" "$vardisk"
t1=$(date +%s)
log "QEMU exited $qrc after $((t1 - t0)) s"
[ "$qrc" = 124 ] && log "TIMEOUT: the VM ran longer than ${VM_TIMEOUT}s and was killed"

if [ ! -f "$run/go-test.txt" ]; then die "no go test output (see $run/console.txt)"; fi
echo "==== go test output ($run/go-test.txt)"
cat "$run/go-test.txt"
if [ ! -f "$run/go-test.rc" ]; then die "go test did not finish in the VM"; fi
grc="$(cat "$run/go-test.rc")"
# every package must have run: a guest that could not see a package's binary or directory is a
# failure, never an empty pass
ran=$(grep -cE '^(ok|FAIL) ' "$run/go-test.txt" || true)
if [ "$ran" != "$npkgs" ]; then
  log "only $ran of $npkgs packages ran in the VM"
  grc=1
fi
echo "==== summary (top-level tests and their identities)"
grep -E '^(--- |    --- )(FAIL|SKIP)|^(ok|FAIL) ' "$run/go-test.txt" || true
grep -h '^vm-guest:' "$run/console.txt" | tr -d '\r' || true
# The failures' own lines last (what a CI log's tail keeps): what each
# failing test printed (go test -v prints it after the test's === RUN line,
# up to the next test's), bounded.
if grep -q -- '--- FAIL' "$run/go-test.txt"; then
  echo "==== failures (their first lines; the whole log: $run/go-test.txt)"
  grep -oE -- '--- FAIL: [^ ]+' "$run/go-test.txt" | awk '{ print $3 }' | sort -u | while read -r t; do
    awk -v t="$t" '$0 == "=== RUN   " t { on = 1; n = 0; print; next }
                   on && /^(=== (RUN|CONT|PAUSE|NAME)|--- )/ { on = 0 }
                   on && n < 30 { print; n++ }' "$run/go-test.txt"
  done | cut -c1-400 | head -n 150
fi
log "kernel $kver: go test exited $grc; $(grep -c '^--- FAIL' "$run/go-test.txt" || true) top-level failure(s)"
[ "$grc" = 0 ] || exit 1
exit 0
}
