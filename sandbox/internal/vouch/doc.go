// Package vouch says when a directory's identity and change time vouch that
// its entries are still those read earlier, so that a reader may keep what
// it read instead of reading it again: the post-run audit's records
// (internal/audit) and the Landlock rulesets kept for reuse
// (landlock.Cache).
//
// The kernel sets a directory's change time whenever an entry is made,
// removed or renamed in it, and no unprivileged call can set it back. Two
// things weaken that, and this package is where both are answered: a
// network or FUSE filesystem, whose server decides the times ([LocalFS]),
// and a kernel with coarse timestamps, which gives a change made within the
// same tick as the read the same time ([Settle]).
//
// It only answers questions about stat results: it must never open, read or
// cache anything, and it holds no state.
package vouch
