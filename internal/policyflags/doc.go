// Package policyflags holds the command-line flags shared by the dsh-sandbox
// commands that configure a sandbox policy (dsh-sandbox-run,
// dsh-sandbox-mcp): the mode, the workspace and writable roots, protected
// paths, the deny-read set, the network and its allowlist, and the resource
// limits. Each command registers them on its own pflag.FlagSet, in the
// order it wants them listed, and checks them after parsing.
package policyflags
