//go:build linux

package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/landlock"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// preparation is everything the supervisor builds for one runner before it
// starts: the Landlock ruleset fd, the seccomp program, and the facts that
// decide the runner's spec. Policy logic lives here, in Go; the C runner
// only applies it.
type preparation struct {
	policy      modes.Policy
	abi         int
	landlockErr string
	ruleset     *os.File
	bpf         []byte
	notify      bool
}

func prepare(p modes.Policy) (*preparation, error) {
	prep := &preparation{policy: p}
	if !p.Mode.Confines() {
		return prep, nil
	}
	if !seccomp.Supported() {
		return nil, errors.New("seccomp filtering is not available on this host")
	}
	prep.notify = seccomp.NotifySupported()
	bpf, err := seccomp.Program(seccomp.Spec{Network: p.Network, Notify: prep.notify})
	if err != nil {
		return nil, err
	}
	prep.bpf = bpf
	if abi, err := landlock.ABI(); err != nil {
		prep.landlockErr = err.Error()
	} else {
		rs, err := landlock.ForABI(p, abi).Build()
		if err != nil {
			return nil, err
		}
		prep.abi, prep.ruleset = abi, rs
	}
	return prep, nil
}

func (prep *preparation) close() {
	if prep.ruleset != nil {
		prep.ruleset.Close()
	}
}

// spec encodes the runner's spec for the namespaces it was started in.
func (prep *preparation) spec(ns namespaces) ([]byte, error) {
	p := prep.policy
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	opts := [][2]string{
		{"confine", b(p.Mode.Confines())},
		{"mountview", b(p.Mode.Confines() && ns.Mount)},
		{"landlock", b(prep.ruleset != nil)},
		// The self-test path lies in /proc; a policy whose writable roots
		// cover /proc (workspace "/") leaves nothing to deny there.
		{"llselftest", b(rootOf(p.WritableRoots, "/proc") == "")},
		{"notify", b(prep.notify)},
		{"why", joinNonEmpty("; ", ns.Error, prep.landlockErr)},
	}
	var plan []string
	if p.Mode.Confines() && ns.Mount {
		var err error
		if plan, err = mountPlan(p, ns.PID); err != nil {
			return nil, err
		}
	}
	return specTokens(opts, plan), nil
}

// assess turns the runner's ready message into the command's Enforcement.
func (c *Cmd) assess(m runnerMsg) Enforcement {
	l := layers{ns: c.ns}
	if m.Layers != nil {
		l.mountView, l.freshProc, l.seccomp, l.notify = m.Layers.MountView, m.Layers.FreshProc, m.Layers.Seccomp, m.Layers.Notify
		if m.Layers.Landlock {
			l.landlockABI = c.prep.abi
		}
	}
	e := assess(c.Policy.Mode, l)
	if c.Policy.Mode.Confines() {
		for _, r := range []string{c.ns.Error, c.prep.landlockErr, m.Detail} {
			if r != "" {
				e.Reasons = append(e.Reasons, r)
			}
		}
	}
	return e
}

func unwrapExecErr(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
