package sandbox

import (
	"fmt"
	"io"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// probeVersion is the version of the ProbeReport JSON format; version 2
// names every key in camelCase.
const probeVersion = 2

// ProbeReport says what this host can enforce. It is the JSON document of
// dsh-sandbox-run --probe --json.
type ProbeReport struct {
	Version    int                  `json:"version"`
	Landlock   LandlockProbe        `json:"landlock"`
	Seccomp    SeccompProbe         `json:"seccomp"`
	Namespaces NamespaceProbe       `json:"namespaces"`
	Modes      map[string]ModeProbe `json:"modes"`
	// Limits is what enforces the default resource limits of a
	// workspace-write command ("cgroup-v1", "cgroup-v2", "rlimit",
	// "none"); each mode's own is in Modes.
	Limits string `json:"limits"`
	// Allowlist is how a network allowlist (modes.Allowlist) is held here:
	// "net-namespace", "supervisor" (with Landlock's TCP rules, ABI 4),
	// "supervisor-only" (egress-landlock missing) or "unavailable".
	Allowlist string `json:"allowlist"`
	// Caches is how a workspace-write command's toolchain caches are held
	// here (modes.Policy.Caches): "overlay" where it gets a mount view,
	// "variables" without one, else "read-only".
	Caches string `json:"caches"`
	// Loopback is what a confined command with the network off gets for a
	// loopback here: "net-namespace", "own-address", or "refused".
	Loopback string `json:"loopback"`
	// CredentialFiles is what a confined command reads of the tools'
	// credential files (modes.Policy.CredentialFiles): "sanitized" where it
	// gets a mount view (a copy without the secrets), else "hidden".
	CredentialFiles string `json:"credentialFiles"`
	// Confined is true when both confined modes can run.
	Confined bool `json:"confined"`
}

// LandlockProbe is the Landlock part of a ProbeReport.
type LandlockProbe struct {
	// ABI is the ABI the sandbox uses: the kernel's, or less when capped
	// (ProbeOptions.LandlockABI, --landlock-abi), then KernelABI says the
	// kernel's.
	ABI       int      `json:"abi"`
	KernelABI int      `json:"kernelAbi,omitempty"`
	Features  []string `json:"features"`
	Error     string   `json:"error,omitempty"`
}

// SeccompProbe is the seccomp part of a ProbeReport.
type SeccompProbe struct {
	Available bool `json:"available"`
	// Notify: seccomp user notification (Linux 5.0), so a supervisor
	// judges the notified calls and reports denials.
	Notify bool `json:"notify"`
	// PidfdGetfd: the supervisor can copy a command's descriptors (Linux
	// 5.6, and a seccomp profile that allows it: Docker's default does only
	// with CAP_SYS_PTRACE). Without it the supervisor replaces the sockets
	// it binds and connects for the command (SECCOMP_IOCTL_NOTIF_ADDFD,
	// Linux 5.9), refuses what it cannot replace, and a network allowlist
	// is unavailable.
	PidfdGetfd bool `json:"pidfdGetfd"`
}

// NamespaceProbe says which namespaces a sandbox gets on this host, and
// why not when it gets none.
type NamespaceProbe struct {
	Namespaces
	Error string `json:"error,omitempty"`
}

// ModeProbe is how one mode would be enforced.
type ModeProbe struct {
	Enforcement string   `json:"enforcement"`
	Layers      []string `json:"layers"`
	Missing     []string `json:"missing"`
	Limits      string   `json:"limits,omitempty"`
	Reasons     []string `json:"reasons,omitempty"`
	Error       string   `json:"error,omitempty"`
}

// How a network allowlist is held (ProbeReport.Allowlist).
const (
	allowlistNetNS          = "net-namespace"   // the proxy's listener in the command's own net namespace is its only route
	allowlistSupervisor     = "supervisor"      // the supervisor connects inet sockets to the proxy only, Landlock limits TCP ports
	allowlistSupervisorOnly = "supervisor-only" // the same without Landlock's TCP rules (ABI < 4)
	allowlistUnavailable    = "unavailable"     // no seccomp user notification or no pidfd_getfd: an allowlist is refused
)

// How the toolchain caches are held (ProbeReport.Caches).
const (
	cachesOverlay   = "overlay"   // written through an overlay whose upper layer is the sandbox's
	cachesVariables = "variables" // no mount view: the tools' variables (GOCACHE, ...) point at the sandbox's store
	cachesReadOnly  = "read-only" // read-only, as outside every writable root
)

// What a confined command reads of a credential file
// (ProbeReport.CredentialFiles).
const (
	credentialsSanitized = "sanitized" // a read-only copy without its secrets
	credentialsHidden    = "hidden"    // nothing: hidden whole
)

// What a confined command's loopback is (ProbeReport.Loopback).
const (
	loopbackNetNS      = "net-namespace" // its net namespace's
	loopbackOwnAddress = "own-address"   // an address of its own on the host's, 127.64.0.0/10
	loopbackRefused    = "refused"       // inet sockets are refused
)

// ProbeOptions are the inputs of ProbeWith.
type ProbeOptions struct {
	Runner    string // the runner binary; "" for this executable
	Workspace string // the workspace of the probing commands
	// LandlockABI caps the Landlock ABI as Cmd.LandlockABI does.
	LandlockABI int
}

// WriteText prints the report in the human-readable form of
// dsh-sandbox-run --probe.
func (r ProbeReport) WriteText(w io.Writer) {
	if r.Landlock.Error != "" {
		fmt.Fprintf(w, "landlock: no (%s)\n", r.Landlock.Error)
	} else {
		capped := ""
		if r.Landlock.KernelABI != 0 {
			capped = fmt.Sprintf(", capped: the kernel has abi %d", r.Landlock.KernelABI)
		}
		fmt.Fprintf(w, "landlock: abi %d (%s%s)\n", r.Landlock.ABI, strings.Join(r.Landlock.Features, ", "), capped)
	}
	getfd := ""
	if r.Seccomp.Notify && !r.Seccomp.PidfdGetfd {
		getfd = ", no pidfd_getfd: sockets replaced, not copied"
	}
	fmt.Fprintf(w, "seccomp: %s (user notification: %s%s)\n", yesNo(r.Seccomp.Available), yesNo(r.Seccomp.Notify), getfd)
	n := r.Namespaces
	fmt.Fprintf(w, "namespaces: user %s, mount %s, pid %s, net %s, ipc %s, uts %s", yesNo(n.User), yesNo(n.Mount),
		yesNo(n.PID), yesNo(n.Net), yesNo(n.IPC), yesNo(n.UTS))
	if n.Error != "" {
		fmt.Fprintf(w, " (%s)", n.Error)
	}
	fmt.Fprintln(w)
	switch r.Limits {
	case limitsCgroupV1, limitsCgroupV2:
		fmt.Fprintf(w, "limits: %s (pids, memory+swap, cpu)\n", r.Limits)
	case limitsRlimit:
		fmt.Fprintf(w, "limits: %s (pids only: RLIMIT_NPROC in the user namespace)\n", r.Limits)
	case "":
	default:
		fmt.Fprintf(w, "limits: %s\n", r.Limits)
	}
	switch r.Allowlist {
	case allowlistNetNS:
		fmt.Fprintln(w, "allowlist: net-namespace (the egress proxy is the command's only route)")
	case allowlistSupervisor:
		fmt.Fprintln(w, "allowlist: supervisor (inet connects reach only the egress proxy; Landlock tcp rules)")
	case allowlistSupervisorOnly:
		fmt.Fprintln(w, "allowlist: supervisor-only (inet connects reach only the egress proxy; missing: egress-landlock)")
	case allowlistUnavailable:
		fmt.Fprintln(w, "allowlist: unavailable (needs seccomp user notification and pidfd_getfd)")
	}
	switch r.Caches {
	case cachesOverlay:
		fmt.Fprintln(w, "caches: overlay (workspace-write writes the toolchain caches through an overlay; yours stay as they are)")
	case cachesVariables:
		fmt.Fprintln(w, "caches: variables (no mount view: GOCACHE, npm_config_cache, ... point at the sandbox's store; yours stay as they are)")
	case cachesReadOnly:
		fmt.Fprintln(w, "caches: read-only (no mount view, no Landlock)")
	}
	switch r.CredentialFiles {
	case credentialsSanitized:
		fmt.Fprintln(w, "credential files: sanitized (~/.npmrc, ~/.pypirc, pip.conf, ~/.docker/config.json, cargo's: a read-only copy without the secrets)")
	case credentialsHidden:
		fmt.Fprintln(w, "credential files: hidden (no mount view: ~/.npmrc, ~/.pypirc, ~/.docker/config.json, cargo's, and a pip.conf with a secret, whole)")
	}
	switch r.Loopback {
	case loopbackNetNS:
		fmt.Fprintln(w, "loopback: net-namespace (the command's own)")
	case loopbackOwnAddress:
		fmt.Fprintln(w, "loopback: own-address (an address of the command's own on the host's loopback, shown as 127.0.0.1)")
	case loopbackRefused:
		fmt.Fprintln(w, "loopback: refused (needs seccomp user notification, and a net namespace or pidfd_getfd)")
	}
	for _, m := range modes.All() {
		mp := r.Modes[m.String()]
		switch {
		case mp.Enforcement == levelNone:
			fmt.Fprintf(w, "%s: unconfined\n", m)
		case mp.Error != "":
			fmt.Fprintf(w, "%s: unavailable (%s)\n", m, mp.Error)
		case len(mp.Missing) > 0:
			fmt.Fprintf(w, "%s: %s (missing: %s)\n", m, mp.Enforcement, strings.Join(mp.Missing, ", "))
		default:
			fmt.Fprintf(w, "%s: %s\n", m, mp.Enforcement)
		}
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
