// Package facts owns the denial facts of one command: [Denial], what the
// sandbox refused, and [Log], which aggregates them by (op, path, address)
// with at most [MaxDenials] distinct ones.
//
// It is the lowest layer the supervisor, the git audit and package sandbox
// share. It must never decide anything: it records what the layers above
// refused, and never grows without bound (past MaxDenials it only counts).
// It imports nothing of the sandbox but modes.
package facts
