// Package policyfile reads the policy files of dsh-sandbox: the user's
// config.toml and a workspace's .dsh-sandbox.toml. Each holds every policy
// flag's setting under the flag's own name with underscores (mode,
// allow_write, allow_domain, ...), named profiles ([profiles.NAME], one
// profile may extend another) and the toolchain presets to allow.
//
// It owns the files' format, the order in which they apply (the user's
// file, then a trusted project file; in each the top level, then the
// profile's extends chain, then the profile), where each setting came
// from, and the trust of a project file: a .dsh-sandbox.toml applies only
// while its bytes hash to what `dsh-sandbox-run trust` recorded in the
// user's state directory.
//
// It never writes a policy file, never applies a project file it was not
// told is trusted, never follows a symlink to read one, and never decides
// anything a flag decides: the commands apply flags on top of what Load
// returns (internal/policyflags), and a Go harness turns Settings into an
// executor.Config itself (see the example).
package policyfile
