// Package audit closes persistence in the audited roots (the workspace and
// the extra writable roots, modes.Policy.AuditedRoots): what the user's own
// programs, run later outside the sandbox, would execute or load. [Start]
// records, before the command starts, every git control entry — what git
// executes or follows — of every repository there, found as git finds one
// and at any depth (being, or looking like, a git directory never ends the
// walk), every entry at or under each protected path (the names of
// modes.ProtectedNames, --protect paths), and every entry at or under each
// path the repositories' own configs make git run (a core.hooksPath, an
// included config, a driver's program); [Finish], once every process of the
// command is gone, neutralizes each of them that is new or changed and not
// inert, and each directory it cannot read that the command could have
// written in, recording each as a denial.
//
// Its walks record what they read of each directory — its identity and
// change time, taken before its entries — and take an unchanged directory's
// entries from a record instead of reading them again: the end's from the
// start's, and, through a [Cache], a command's from an earlier command's —
// of this process, or of an earlier one that wrote them
// ([Cache.WriteRecords], [Cache.ReadRecords], persist_linux.go). A
// Cache set to watch also has the kernel report every change of the
// directories its walks recorded (inotify, watch_linux.go), and its walks
// take a directory that reported none without a system call. It must never
// take from a record what the record cannot vouch for: a directory on a
// filesystem whose change times and events are not the kernel's own (a
// network or FUSE one), one changed too recently for a coarse timestamp to
// show a later change and not watched, or one watched since before the
// kernel lost events.
//
// It is its own package, not part of the supervisor: it never sees a
// notification. Its start walk runs before the command can change anything
// — before the command starts, or beside the command's start while the
// supervisor holds the command's first call that may change a file
// ([StartStoppable], abandoned when the command ended having made none) —
// and Finish after the command ended: it must never run while a process of
// the command can change what it reads (nothing may race its walk or its
// renames). It walks through descriptors and an
// os.Root of each audited root and must never follow a symlink out of it or
// descend through one, nor skip what it cannot read. It changes nothing but
// the entries it renames aside ("<name>.dsh-quarantined") — or, in a
// transaction's upper layer, removes — and never a protected path the
// kernel held read-only for the whole run. The only modes it touches undo
// the command's own: an owner's write and search permission on a directory,
// for a rename out of it, given back after; the audited root's mode at the
// start, when the command took its read permission away.
package audit
