// Package cachestore owns the upper layers of the toolchain caches
// (modes.ToolCaches): one entry per cache directory in the policy's cache
// store, with the overlay's upper and work directories, its lock, and the
// store's size bound.
//
// [Open] makes what a command needs before its runner starts: the missing
// cache directories (empty, in the user's home, so that an overlay has a
// mount point), the entries, and an exclusive lock on each entry the
// command will mount, held until [Store.Close] — once every process of the
// command is gone. An entry locked by another running command is left out
// (that command's overlay is live on it: two overlays sharing an upper
// layer are undefined), and so stays read-only for this one. An entry
// mounted volatile (Linux 5.10: the overlay never syncs the upper
// filesystem) is readied for it under its lock: emptied when it was
// mounted in another boot ([Layer.Volatile], readyVolatile). Each mount
// gets a work directory of its own (freshWork), so the marker the kernel
// leaves in an earlier volatile mount's is never in its way; what earlier
// mounts left is removed beside the command, which [Store.Close] waits for
// (sweepWork). A cache directory with nothing in it is marked
// [Layer.Empty]: its upper layer can be bound there instead of an overlay.
// [Clean] empties the entries no command holds; Open does the same when
// the store outgrew its bound, at most once an hour.
//
// It runs in the supervisor, as the user. It must never mount anything
// (the runner does), never write into a user's cache directory (only make
// a missing one), and never follow a symlink in an entry: an upper layer
// holds what confined commands wrote, removed only while no command holds
// its lock, through descriptors.
package cachestore
