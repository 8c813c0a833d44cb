// Package landlock turns a [modes.Policy] into one Landlock ruleset and
// enforces it on the calling thread.
//
// Compatibility with older kernels is handled in one place, [ForABI]: the
// handled rights are the policy's rights intersected with what the running
// kernel's ABI knows, so an older ABI enforces less but never nothing (the
// go-landlock BestEffort trap where a REFER rule on ABI 1 drops the whole
// ruleset cannot happen here). [Ruleset.Features] says what the ABI covers so
// the caller can report missing guarantees.
//
// Rules bind to inodes opened when the ruleset is built: build it after the
// mount view exists. Restrict applies to the calling OS thread only (the
// runner locks its thread and starts the command from it), because a
// process-wide restriction needs TSYNC (ABI 8) or cgo-free AllThreadsSyscall.
package landlock
