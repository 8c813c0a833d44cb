//go:build !linux

package sandbox

// Off Linux the package compiles so that a cross-platform harness can link
// it, but nothing runs: every entry point that would start a command
// returns ErrUnsupported (see its doc), and the shared types (Policy,
// Report, Denial, Result, ProbeReport, ...) are the same as on Linux.

import (
	"errors"
	"io"
	"os"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// errNotStarted is what the methods of a Cmd that never started return.
var errNotStarted = errors.New("sandbox: not started")

// cmdState is empty off Linux: no Cmd ever starts.
type cmdState struct{}

// Start returns a *SetupError wrapping ErrUnsupported: the command never runs.
func (c *Cmd) Start() error {
	return &SetupError{Detail: ErrUnsupported.Error(), Err: ErrUnsupported}
}

// Wait returns an error: off Linux no Cmd is ever started.
func (c *Cmd) Wait() (*Result, error) { return nil, errNotStarted }

// Signal returns an error: off Linux no Cmd is ever started.
func (c *Cmd) Signal(os.Signal) error { return errNotStarted }

// Kill returns an error: off Linux no Cmd is ever started.
func (c *Cmd) Kill() error { return errNotStarted }

// Pid is 0: off Linux no Cmd is ever started.
func (c *Cmd) Pid() int { return 0 }

// AuditCache is what the post-run audit read of the writable roots, kept
// for the next commands. Off Linux no command is audited: it stays empty.
type AuditCache struct{ Watch bool }

// Close does nothing: off Linux the cache watches nothing.
func (a *AuditCache) Close() error { return nil }

// RecordsChanged reports false.
func (a *AuditCache) RecordsChanged() bool { return false }

// WriteRecords returns ErrUnsupported.
func (a *AuditCache) WriteRecords(io.Writer) (bool, error) { return false, ErrUnsupported }

// ReadRecords returns ErrUnsupported.
func (a *AuditCache) ReadRecords(io.Reader) error { return ErrUnsupported }

// LoadRecords is ReadRecords in the background (Linux): nothing here.
func (a *AuditCache) LoadRecords(io.Reader) {}

// NamespaceCache keeps the namespaces commands share (Linux). Off Linux no
// command is started: it keeps nothing.
type NamespaceCache struct{}

// Close does nothing.
func (nc *NamespaceCache) Close() error { return nil }

// RulesetCache keeps the Landlock rulesets' derivations (Linux). Off Linux
// no command is started: it keeps nothing.
type RulesetCache struct{}

// Close does nothing.
func (rc *RulesetCache) Close() error { return nil }

// EgressProxy is the egress proxy of the commands whose policy has a network
// allowlist. Off Linux no command uses one: it never listens.
type EgressProxy struct{}

// NewEgressProxy returns a proxy; off Linux no command can use it.
func NewEgressProxy() *EgressProxy { return &EgressProxy{} }

// Close does nothing off Linux: the proxy never listened.
func (e *EgressProxy) Close() error { return nil }

// Exited is nil off Linux: no Cmd is ever started.
func (c *Cmd) Exited() <-chan struct{} { return nil }

// Enforcement is the zero Enforcement off Linux: no Cmd is ever started.
func (c *Cmd) Enforcement() Enforcement { return Enforcement{} }

// ProbeWith reports, off Linux, that nothing can be enforced: Confined is
// false, every mode is unavailable with ErrUnsupported's message.
func ProbeWith(ProbeOptions) ProbeReport {
	msg := ErrUnsupported.Error()
	r := ProbeReport{Version: probeVersion, Modes: map[string]ModeProbe{}, Limits: limitsNone, Allowlist: allowlistUnavailable,
		Landlock: LandlockProbe{Features: []string{}, Error: msg}, Namespaces: NamespaceProbe{Error: msg}}
	for _, m := range modes.All() {
		r.Modes[m.String()] = ModeProbe{Enforcement: levelUnavailable, Layers: []string{}, Missing: []string{}, Error: msg}
	}
	return r
}

// Attach returns ErrUnsupported off Linux.
func Attach() (reap func(), err error) { return nil, ErrUnsupported }

// CacheUsage returns ErrUnsupported: off Linux no command adds to a cache.
func CacheUsage(store string) (int64, error) { return 0, ErrUnsupported }

// CleanCaches returns ErrUnsupported: off Linux no command adds to a cache.
func CleanCaches(store string) (busy int, err error) { return 0, ErrUnsupported }
