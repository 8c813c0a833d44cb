#!/usr/bin/env bash
# build-initramfs.sh KROOT OUT: the VM's initramfs (gzip'd newc cpio, ~1.5 MB) for the kernel
# unpacked under KROOT (dpkg-deb -x, depmod -b done): busybox-static, init.sh as /init, and the
# virtio-pci / 9p / overlay / virtio-blk / ext4 modules (decompressed) with their dependencies in
# load order.
set -euo pipefail
kroot=$1 out=$2
here="$(cd "$(dirname "$0")" && pwd)"
busybox="$(command -v busybox || true)"
# (ldd fails on a static executable)
if [ -z "$busybox" ] || ldd "$busybox" >/dev/null 2>&1; then
  echo "build-initramfs: a static busybox is needed (apt-get install busybox-static; make vm-deps)" >&2
  exit 1
fi
kver="$(ls "$kroot/lib/modules")"
moddir="$kroot/lib/modules/$kver"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/modules"
cp "$busybox" "$work/bin/busybox"
cp "$here/init.sh" "$work/init"
chmod 0755 "$work/init" "$work/bin/busybox"

declare -A seen=()
order=()
deps_of() { # the dependencies modules.dep lists for module path $1 (relative to $moddir)
  awk -v m="$1:" '$1 == m { for (i = 2; i <= NF; i++) print $i }' "$moddir/modules.dep"
}
add() { # depth-first: dependencies before the module
  local m=$1 d
  [ -n "${seen[$m]:-}" ] && return 0
  seen[$m]=1
  for d in $(deps_of "$m"); do add "$d"; done
  order+=("$m")
}
# virtio_blk, crc32c_generic (ext4's checksums, a soft dependency modules.dep does not list) and
# ext4: the guest's /tmp disk (init.sh); optional, /tmp falls back to tmpfs without them
for name in virtio_pci 9pnet_virtio 9p overlay virtio_blk? crc32c_generic? ext4?; do
  optional=""
  case "$name" in *\?) name="${name%\?}" optional=1 ;; esac
  path="$(awk -F: -v n="$name" '{ b = $1; sub(/.*\//, "", b); sub(/\.ko(\.[a-z]+)?$/, "", b); if (b == n) { print $1; exit } }' "$moddir/modules.dep")"
  if [ -z "$path" ]; then
    if grep -qE "/$name\.ko" "$moddir/modules.builtin"; then continue; fi
    if [ -n "$optional" ]; then echo "build-initramfs: no module $name for $kver (optional)" >&2; continue; fi
    echo "build-initramfs: module $name not found for $kver" >&2; exit 1
  fi
  add "$path"
done
for m in "${order[@]}"; do
  base="$(basename "$m")"; dst="${base%%.ko*}.ko"
  case "$m" in
    *.ko.xz) xz -dc "$moddir/$m" >"$work/modules/$dst" ;;
    *.ko.zst) zstd -qdc "$moddir/$m" >"$work/modules/$dst" ;;
    *.ko.gz) gzip -dc "$moddir/$m" >"$work/modules/$dst" ;;
    *) cp "$moddir/$m" "$work/modules/$dst" ;;
  esac
  echo "$dst" >>"$work/modules/order"
done
(cd "$work" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -9 >"$out.tmp"
mv "$out.tmp" "$out"
echo "build-initramfs: $out ($(du -h "$out" | cut -f1)), modules: $(tr '\n' ' ' <"$work/modules/order")"
