#!/bin/busybox sh
# PID 1 of the VM's initramfs (integration/vm/build-initramfs.sh puts it at /init): load the
# 9p/overlay/virtio modules, mount the host root read-only over 9p under a tmpfs overlay, the
# writable "results" share, /tmp and /var/tmp on fresh ext4 disks, fresh tmpfs /run /dev/shm, then
# switch_root into it
# and run /results/guest.sh (written by integration/vm/run.sh). Any failure powers the VM off.
# shellcheck shell=sh
/bin/busybox mkdir -p /proc /sys /dev /bin
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

fail() {
  echo "vm-init: FAILED: $*" >/dev/console
  echo o >/proc/sysrq-trigger
  poweroff -f
}

echo "vm-init: kernel $(uname -r), loading modules" >/dev/console
while read -r m; do
  insmod "/modules/$m" || fail "insmod $m"
done </modules/order

mkdir -p /lower /up /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /lower || fail "mount hostroot"
mount -t tmpfs -o mode=0755 tmpfs /up || fail "tmpfs /up"
mkdir -p /up/u /up/w
mount -t overlay -o lowerdir=/lower,upperdir=/up/u,workdir=/up/w overlay /newroot || fail "overlay"
mkdir -p /newroot/results
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 results /newroot/results || fail "mount results"
for d in proc sys dev; do
  mount --move "/$d" "/newroot/$d" || fail "move /$d"
done
# /tmp on the ext4 disk run.sh attaches (as on a real Debian 12 host, /tmp on disk): tmpfs keeps
# user.* xattrs only from Linux 6.6, and a transaction's overlay (sandbox/transaction) needs them
# in its upper layer; without the disk (or ext4), tmpfs
if [ -b /newroot/dev/vda ] && mount -t ext4 /newroot/dev/vda /newroot/tmp; then
  chmod 1777 /newroot/tmp
else
  echo "vm-init: /tmp on tmpfs (no ext4 disk)" >/dev/console
  mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp || fail "tmpfs /tmp"
fi
# /var/tmp on the second disk: the tests' transaction directories live there (outside /tmp, a
# writable root, on a filesystem with user.* xattrs)
if [ -b /newroot/dev/vdb ] && mount -t ext4 /newroot/dev/vdb /newroot/var/tmp; then
  chmod 1777 /newroot/var/tmp
else
  echo "vm-init: /var/tmp on tmpfs (no second ext4 disk)" >/dev/console
  mount -t tmpfs -o mode=1777 tmpfs /newroot/var/tmp || fail "tmpfs /var/tmp"
fi
mount -t tmpfs -o mode=0755 tmpfs /newroot/run || fail "tmpfs /run"
mkdir -p /newroot/dev/shm /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm || fail "tmpfs /dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /newroot/dev/pts || fail "devpts"
mount -t cgroup2 cgroup2 /newroot/sys/fs/cgroup || echo "vm-init: no cgroup2" >/dev/console
# the controllers enabled for the root's children, as systemd does on a real host: commands get
# resource limits from a cgroup of their own (sandbox/internal/limits)
for c in pids memory cpu; do
  echo "+$c" >/newroot/sys/fs/cgroup/cgroup.subtree_control || echo "vm-init: no cgroup2 $c controller" >/dev/console
done
# what udev and systemd give every real host: /dev/fd, /dev/std{in,out,err}
ln -s /proc/self/fd /newroot/dev/fd
ln -s /proc/self/fd/0 /newroot/dev/stdin
ln -s /proc/self/fd/1 /newroot/dev/stdout
ln -s /proc/self/fd/2 /newroot/dev/stderr
# root's home, fresh: the host's holds the Go module and build caches (17k directories), which a
# test that takes the home as its workspace would otherwise walk over 9p; the tests' binaries are
# built on the host, so nothing in the guest needs those caches
mount -t tmpfs -o mode=0700 tmpfs /newroot/root || fail "tmpfs /root"
# the host paths the guest needs (the repository, with this run's test binaries in it) may lie
# under a directory mounted fresh above (a clone in /tmp, say): bind the host's copy back there
if [ -f /newroot/results/host-paths ]; then
  while read -r p; do
    case "$p" in /*) ;; *) fail "host path $p is not absolute" ;; esac
    [ -d "/lower$p" ] || fail "host path $p: not a directory on the host"
    mkdir -p "/newroot$p" || fail "mkdir $p"
    mount --bind "/lower$p" "/newroot$p" || fail "bind $p"
  done </newroot/results/host-paths
fi
# the guest kernel's modules in /lib/modules, as on a real host: modprobe (the host's, over 9p)
# then loads what the kernel asks for on demand
if [ -f /newroot/results/modules-dir ]; then
  read -r m </newroot/results/modules-dir
  [ -d "/lower$m" ] || fail "modules $m: not a directory on the host"
  kmods="/newroot/lib/modules/$(uname -r)"
  if [ ! -d "$kmods" ]; then
    mkdir -p "$kmods" || fail "mkdir $kmods"
    mount --bind "/lower$m" "$kmods" || fail "bind $m"
  fi
fi
[ -f /newroot/results/guest.sh ] || fail "no /results/guest.sh"
# shellcheck disable=SC2093 # fail only runs when the exec fails
exec switch_root /newroot /bin/bash /results/guest.sh
fail "switch_root"
