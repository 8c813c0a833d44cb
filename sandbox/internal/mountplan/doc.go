// Package mountplan computes the mount view of a policy: [Plan] turns a
// modes.Policy and the host's mount table into the runner's mount steps
// (spec tokens: mount, bind, pin, check, Landlock grant), in the order the
// runner applies them inside its private mount namespace. [RootOf] and
// [ProcGlobal] answer the questions about that view that the spec and the
// supervisor ask.
//
// It runs in the supervisor before the runner starts, and only reads (the
// mount table, the device and /proc entries it must keep or cover). It must
// never mount anything itself — the runner does, in its own namespace — and
// every step it plans restricts or is neutral, so a view that fails half-way
// is never looser than none (a toolchain cache's overlay adds a writable
// layer, but the sandbox's own, over a cache the command may read: no file
// of the user's becomes writable); a path keeps its meaning inside the view
// (nothing is moved), so the supervisor and the command agree on every path.
package mountplan
