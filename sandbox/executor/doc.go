// Package executor is what a harness links to run `bash -c` commands for a
// model under a sandbox mode: in the foreground ([Executor.Run]) or the
// background ([Executor.Start], [Process]), with output tails and spill
// files, timeouts, abort, whole-tree kills, a scrubbed environment with the
// managed DSH_* variables, and fail-closed classification
// ([SandboxUnavailableError]: a confined mode that cannot be enforced never
// runs the command).
//
// It owns the request's resolution (mode, workdir, session workspace,
// environment, timeout) and the run's lifecycle around one [sandbox.Cmd];
// its [RunResult] carries the command's output and status and the sandbox's
// [sandbox.Facts]. It must never confine anything itself: every layer is
// sandbox.Cmd's, and a request it cannot resolve is refused
// ([ErrInvalidRequest]), never run with a weaker policy.
//
// Off Linux the package compiles, so that a cross-platform harness can link
// it, and [New] returns sandbox.ErrUnsupported.
package executor
