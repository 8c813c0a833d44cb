//go:build linux

package sandbox

import (
	"errors"
	"os"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/landlock"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/seccomp"
)

// ProbeWith is Probe with options.
func ProbeWith(o ProbeOptions) ProbeReport {
	r := ProbeReport{Version: probeVersion, Modes: map[string]ModeProbe{}, Confined: true}
	ws := o.Workspace
	// A broad workspace (the cwd is often / or the home directory) says
	// nothing about the host; without a mount view, though, the secrets in
	// it would make workspace-write look unavailable (they cannot be hidden
	// in a writable root). Such a workspace is probed as an empty directory.
	var broad *modes.BroadWorkspaceError
	if _, err := modes.Derive(modes.Options{Mode: modes.WorkspaceWrite, Workspace: ws}); errors.As(err, &broad) && broad.Kind == modes.BroadWorkspace {
		if d, err := os.MkdirTemp("", "dsh-sandbox-probe-"); err == nil {
			defer os.Remove(d)
			ws = d
		}
	}
	if kernel, err := landlock.ABI(); err != nil {
		r.Landlock = LandlockProbe{Features: []string{}, Error: err.Error()}
	} else {
		abi, _ := effectiveABI(o.LandlockABI)
		r.Landlock = LandlockProbe{ABI: abi, Features: landlock.FeaturesOf(abi).Names()}
		if abi != kernel {
			r.Landlock.KernelABI = kernel
		}
	}
	// What a Cmd gets: the listener travels by SCM_RIGHTS, so user
	// notification needs no pidfd_getfd; without it the supervisor replaces
	// sockets rather than copying them, and refuses an allowlist.
	r.Seccomp = SeccompProbe{Available: seccomp.Supported(), Notify: seccomp.NotifySupported(), PidfdGetfd: pidfdGetfdSupported()}
	for _, m := range modes.All() {
		mp := ModeProbe{Layers: []string{}, Missing: []string{}}
		// It runs only `true`: a broad workspace (the cwd is often / or
		// the home directory) says nothing about the host.
		p, err := modes.Derive(modes.Options{Mode: m, Workspace: ws, AllowBroadWorkspace: true})
		var res *Result
		if err == nil {
			// `true` changes nothing: no git audit (which would read every
			// directory under ws, all of / when the probe runs there).
			c := &Cmd{Policy: p, Args: []string{"true"}, Runner: o.Runner, LandlockABI: o.LandlockABI}
			c.noAudit = true
			res, err = c.Run()
		}
		if err != nil {
			mp.Enforcement, mp.Error = levelUnavailable, err.Error()
			if m.Confines() {
				r.Confined = false
			}
		} else {
			mp.Enforcement, mp.Layers, mp.Missing, mp.Reasons = res.Enforcement.Level, res.Enforcement.Layers, res.Enforcement.Missing, res.Enforcement.Reasons
			mp.Limits = res.Enforcement.Limits
			if m == modes.WorkspaceWrite {
				r.Namespaces = namespaceProbe(res.Enforcement)
				r.Limits = res.Enforcement.Limits
			}
		}
		r.Modes[m.String()] = mp
	}
	switch {
	case r.Namespaces.Mount && r.Confined:
		r.Caches = cachesOverlay
	case r.Landlock.ABI > 0 && r.Confined:
		r.Caches = cachesVariables
	default:
		r.Caches = cachesReadOnly
	}
	r.CredentialFiles = credentialsHidden
	if r.Namespaces.Mount && r.Confined {
		r.CredentialFiles = credentialsSanitized
	}
	switch {
	case !r.Seccomp.Notify || !r.Confined:
		r.Loopback = loopbackRefused
	case r.Namespaces.Net:
		r.Loopback = loopbackNetNS
	case r.Seccomp.PidfdGetfd:
		r.Loopback = loopbackOwnAddress
	default:
		r.Loopback = loopbackRefused
	}
	switch {
	case !r.Seccomp.Notify || !r.Seccomp.PidfdGetfd || !r.Confined:
		r.Allowlist = allowlistUnavailable
	case r.Namespaces.Net:
		r.Allowlist = allowlistNetNS
	case r.Landlock.ABI >= 4:
		r.Allowlist = allowlistSupervisor
	default:
		r.Allowlist = allowlistSupervisorOnly
	}
	return r
}

func namespaceProbe(e Enforcement) NamespaceProbe {
	has := map[string]bool{}
	for _, l := range e.Layers {
		has[l] = true
	}
	np := NamespaceProbe{Namespaces: Namespaces{User: has[layerUserNS], Mount: has[layerMountView], PID: has[layerPIDNS],
		Net: has[layerNetNS], IPC: has[layerIPCNS], UTS: has[layerUTSNS]}}
	if !np.User || !np.Mount {
		np.Error = strings.Join(e.Reasons, "; ")
	}
	return np
}
