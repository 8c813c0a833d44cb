// Package transaction runs sandboxed commands against a workspace
// transactionally: the commands' writes are kept aside, can be listed and
// diffed, and are then either committed to the workspace or discarded.
//
// # What a transaction is
//
// A transaction pairs a workspace directory W with a transaction
// directory DIR. The sandbox runner mounts, in the command's mount
// namespace,
//
//	mount -t overlay overlay -o lowerdir=W,upperdir=DIR/upper,workdir=DIR/work,userxattr W
//
// so the command sees W but its writes land in DIR/upper; W itself is not
// changed. Several commands may run one after another in the same
// transaction. Then [Tx.Changes] and [Tx.Diff] show what the commands did,
// and [Tx.Commit] applies the upper layer to W, or [Tx.Discard] drops it.
//
// # On-disk layout
//
//	DIR/transaction.json  manifest: {"version":1, "workspace", "started",
//	                      "started_ctime_ns", "state"}, rewritten atomically
//	DIR/started           marker file; its ctime is the start time
//	DIR/upper/            overlay upper layer (the recorded changes)
//	DIR/work/             overlay work directory
//	DIR/journal           during a commit: the trash and temporary names
//	                      created in W, one quoted path per line
//
// The state goes open → committing → committed, or open → discarded. A
// committed or discarded transaction keeps its manifest, so opening it
// again says what became of it ([ErrEnded]).
//
// How overlayfs records changes in the upper layer: a modified or chmod-ed
// file is a full copy, marked with the xattr user.overlay.origin (or
// trusted.overlay.origin for a mount without userxattr) when it existed in
// W; a removal is a whiteout (a character device 0:0); a directory that
// was removed and created again is "opaque" (xattr overlay.opaque = "y")
// and hides W's contents there. A rename is recorded as a removal plus a
// creation.
//
// # Guarantees
//
// Commit checks every entry before changing anything: if W changed at a
// path the transaction writes or removes after the transaction started
// (the path's ctime is at or after the marker's), or a file the command
// modified was removed from W, Commit returns a [*ConflictError] and W is
// untouched. (With userxattr the origin xattr is empty and survives a
// rename inside the overlay, so a copied-up file whose path is absent from
// W counts as removed concurrently only when its W directory changed
// since the start.) The start time is taken so that it is strictly later than
// every change completed before Create was called, and changes made after
// Create returns get a ctime at or after it.
//
// Each file, symlink and FIFO is applied with one rename(2), so a reader
// sees either its old or its new version; removals rename the old entry to
// a trash name first (recorded in the journal) and delete it afterwards.
// Each applied entry leaves the upper layer, so a commit interrupted by a
// crash or an error can be finished by calling Commit again. The
// workspace's filesystem is synced before the state becomes committed.
// Commit and Discard hold an flock on DIR, so two processes cannot both
// apply one transaction.
//
// # What can be missed
//
//   - When an interrupted commit is resumed, directory ctimes (changed by
//     the commit itself) are not checked, nor are concurrent removals of
//     files the command modified.
//   - The check and the application are not one atomic step: a change to
//     W made while Commit is applying may be overwritten.
//   - The conflict check relies on ctimes: a clock set backwards, or a
//     workspace filesystem with coarse timestamps (1 s or worse), can hide
//     a concurrent change. Changes elsewhere in W, at paths the
//     transaction does not touch, are not conflicts.
//   - A transaction applies per path, not as a whole: a reader of W during
//     Commit sees some entries new and some old.
//   - The upper layer's root (W itself in the overlay) gets W's mode at
//     Create; a change the command makes to W's own mode, owner or
//     timestamps is not applied; device nodes and sockets are skipped
//     ([CommitResult.Skipped]); xattrs are kept when a file is renamed
//     into place and copied best-effort otherwise. Hard links between new
//     files survive when the upper layer is on W's filesystem (rename);
//     overlayfs itself may already have broken links to modified files.
//   - Changes lists a file whose content and mode are unchanged as
//     "modified" when the command copied it up (for example by touching
//     it), and a renamed path as a removal plus a creation.
package transaction
