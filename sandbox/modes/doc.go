// Package modes defines the three sandbox modes of dsh-sandbox, their strict
// order, and the derivation of a concrete, canonical [Policy] (writable roots,
// protected paths, device sinks, network) from user-facing [Options].
//
// A Policy is a plain value: it names what a confined command may write and
// whether it may use the network. The layers that enforce it (mount view,
// Landlock, seccomp) live in the sibling packages and in package sandbox.
package modes
