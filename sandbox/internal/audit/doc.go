// Package audit closes persistence in the audited roots (the workspace and
// the extra writable roots, modes.Policy.AuditedRoots): what the user's own
// programs, run later outside the sandbox, would execute or load. [Start]
// records, before the command starts, every git control entry — what git
// executes or follows — of every repository there, and every entry at or
// under each protected path (the names of modes.ProtectedNames, --protect
// paths); [Finish], once every process of the command is gone, neutralizes
// each control entry that is new or changed and not inert, and each entry of
// a protected path that is new or changed, recording each as a denial.
//
// It is its own package, not part of the supervisor: it never sees a
// notification and runs only before the command starts and after it has
// ended, so it must never run while a process of the command lives (nothing
// may race its walk or its renames). It walks through an os.Root of each
// audited root and must never follow a symlink out of it or descend through
// one; it changes nothing but the entries it renames aside
// ("<name>.dsh-quarantined"), and never a protected path the kernel held
// read-only for the whole run.
package audit
