// Package envreg is the registry of the managed DSH_* environment of the
// bash tool: the trusted variables every model-issued bash call (foreground
// or background) receives, collected fresh for that call.
//
// The executor scrubs every inherited DSH_* variable from the parent's
// environment and applies the collected snapshot last (see
// executor.ChildEnv; the snapshot travels as Request.DshEnv), so a nested
// harness or concurrent parent and child agents never leak a stale
// identity, and the process environment is never read per call nor
// written.
//
// # Built-in variables
//
// The registry owns three keys itself; no contributor can claim them:
//
//   - DSH_HOME: the harness home, always absolute and clean. Precedence:
//     [Options.Home] when non-blank, else a non-blank $DSH_HOME (read once,
//     in [New]), else ~/.dsh. A leading "~" or "~/" is expanded; a relative
//     path is made absolute against the working directory at [New] time.
//   - DSH_SHELL: always "1".
//   - DSH_SESSION_ID: the calling agent's session, set only when the call
//     has an agent with a session.
//
// # Contributors
//
// Other packages add variables with [Registry.Register]. A [Contributor]
// declares every key it may ever return, each with a description
// (declaration is ownership: two contributors cannot own the same key), and
// resolves the values for one [Execution]. Registration fails loudly, and
// atomically, on an empty or duplicate name, a key that is not DSH_ followed
// by [A-Z][A-Z0-9_]*, a reserved built-in key, a missing description or a
// key already owned by another contributor. [Registry.Collect] runs the
// contributors in name order after the built-ins and fails loudly when one
// returns an undeclared key or a non-string value. [SessionPersistence] is
// the ready-made contributor of DSH_SESSION_JSONL.
//
// The error messages are part of the contract and exact:
//
//	bash env contributor name must be non-empty
//	bash env contributor "<n>" is already registered
//	bash env contributor "<n>" declared invalid key "<k>"
//	bash env contributor "<n>" cannot own reserved key "<k>"
//	bash env contributor "<n>" must describe "<k>"
//	bash env key "<k>" is already owned by contributor "<o>"; contributor "<n>" cannot also own it
//	bash env contributor "<n>" returned undeclared key "<k>"
//	bash env contributor "<n>" returned a non-string value for "<k>"
//
// The quotes are literal: names and keys are not escaped.
//
// # Snapshots
//
// [Registry.Collect] returns a [Snapshot]: immutable, key-sorted, sharing
// nothing with the registry or with other snapshots. [Snapshot.Map] hands
// out a fresh map for the executor's request.
//
// [Registry.Variables] lists every managed key, built-ins included, with
// its owner and description, without running any resolver: for
// documentation and diagnostics.
//
// A [Registry] is safe for concurrent use; the package has no global
// mutable state.
package envreg
