//go:build linux

package vouch

import (
	"time"

	"golang.org/x/sys/unix"
)

// Settle is how far before a read a directory's change time must lie for
// it to vouch for what was read: many timer ticks, and more than a clock
// slew moves within a command.
const Settle = 2 * time.Second

// LocalFS reports whether the filesystem of fstatfs result sf sets a
// directory's change time on every change of its entries, from this host's
// clock (no network or FUSE filesystem, whose servers decide).
func LocalFS(sf *unix.Statfs_t) bool {
	switch sf.Type {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC,
		unix.F2FS_SUPER_MAGIC, unix.OVERLAYFS_SUPER_MAGIC:
		return true
	}
	return false
}

// Vouches reports whether the change time of the directory of stat st, on
// the filesystem of sf, vouches for its entries as read after a start less
// the settle time (before: Settle where nothing else is said): a local
// filesystem, and a change time before that.
func Vouches(st *unix.Stat_t, sf *unix.Statfs_t, before time.Time) bool {
	return LocalFS(sf) && time.Unix(st.Ctim.Unix()).Before(before)
}
