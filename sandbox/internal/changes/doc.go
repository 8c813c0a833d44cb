// Package changes owns the change facts of one command: which paths in its
// writable roots it created, modified, removed, renamed or changed the mode
// of ([Change]).
//
// The supervisor calls [Tracker.Touch] for every write-like call it lets
// continue, before the kernel runs it: the first time a path is named, the
// tracker records its state (an fstatat under the command's root, never
// through a symlink). Once every process of the command is gone,
// [Tracker.Settle] looks at each recorded path once more and compares: no
// scan of the workspace, one lookup per path the command named. It must
// never decide anything about the command and never act for it: it only
// looks, and only at paths the command named in calls the policy allowed.
//
// What it cannot see: writes through a descriptor opened before the
// command started or passed in (the notified call is the open, not the
// write), writes through a shared mmap of a file opened before, the
// contents of a directory renamed or removed as a whole (the directory is
// reported, not each entry), chmod/chown of a path the command named in no
// write-like call, a rewrite that keeps both the size and the modification
// time (within the filesystem's timestamp granularity), a path another
// thread rewrites between the supervisor's read and the kernel's (the call
// is continued, and the kernel reads the path again), and a path the
// supervisor cannot resolve (the kernel layers judge that call). So a
// tracker's paths are facts for the report, never a bound on what the
// command changed: nothing may skip a look because no path named it.
package changes
