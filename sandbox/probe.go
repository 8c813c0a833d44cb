package sandbox

import (
	"fmt"
	"io"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// ProbeVersion is the version of the ProbeReport JSON format; version 2
// names every key in camelCase.
const ProbeVersion = 2

// ProbeReport says what this host can enforce. It is the JSON document of
// dsh-sandbox-run --probe --json.
type ProbeReport struct {
	Version    int                  `json:"version"`
	Landlock   LandlockProbe        `json:"landlock"`
	Seccomp    SeccompProbe         `json:"seccomp"`
	Namespaces NamespaceProbe       `json:"namespaces"`
	Modes      map[string]ModeProbe `json:"modes"`
	// Limits is what enforces the default resource limits of a
	// workspace-write command (LimitsCgroupV1, LimitsCgroupV2,
	// LimitsRlimit, LimitsNone); each mode's own is in Modes.
	Limits string `json:"limits"`
	// Allowlist is how a network allowlist (modes.Allowlist) is held here:
	// AllowlistNetNS, AllowlistSupervisor (with Landlock's TCP rules, ABI
	// 4), AllowlistSupervisorOnly (egress-landlock missing) or
	// AllowlistUnavailable.
	Allowlist string `json:"allowlist"`
	// Caches is how a workspace-write command's toolchain caches are held
	// here (modes.Policy.Caches): CachesOverlay where it gets a mount view,
	// CachesVariables without one, else CachesReadOnly.
	Caches string `json:"caches"`
	// Loopback is what a confined command with the network off gets for a
	// loopback here: LoopbackNetNS, LoopbackOwnAddress, or LoopbackRefused.
	Loopback string `json:"loopback"`
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

// Probe finds out what this host can enforce by doing it: it runs `true`
// under each confined mode (workspace: ws) with runner as the runner binary
// ("" for this executable), and reports the layers each got.
func Probe(runner, ws string) ProbeReport {
	return ProbeWith(ProbeOptions{Runner: runner, Workspace: ws})
}

// How a network allowlist is held (ProbeReport.Allowlist).
const (
	AllowlistNetNS          = "net-namespace"   // the proxy's listener in the command's own net namespace is its only route
	AllowlistSupervisor     = "supervisor"      // the supervisor connects inet sockets to the proxy only, Landlock limits TCP ports
	AllowlistSupervisorOnly = "supervisor-only" // the same without Landlock's TCP rules (ABI < 4)
	AllowlistUnavailable    = "unavailable"     // no seccomp user notification or no pidfd_getfd: an allowlist is refused
)

// How the toolchain caches are held (ProbeReport.Caches).
const (
	CachesOverlay   = "overlay"   // written through an overlay whose upper layer is the sandbox's
	CachesVariables = "variables" // no mount view: the tools' variables (GOCACHE, ...) point at the sandbox's store
	CachesReadOnly  = "read-only" // read-only, as outside every writable root
)

// What a confined command's loopback is (ProbeReport.Loopback).
const (
	LoopbackNetNS      = "net-namespace" // its net namespace's
	LoopbackOwnAddress = "own-address"   // an address of its own on the host's, 127.64.0.0/10
	LoopbackRefused    = "refused"       // inet sockets are refused
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
	case LimitsCgroupV1, LimitsCgroupV2:
		fmt.Fprintf(w, "limits: %s (pids, memory+swap, cpu)\n", r.Limits)
	case LimitsRlimit:
		fmt.Fprintf(w, "limits: %s (pids only: RLIMIT_NPROC in the user namespace)\n", r.Limits)
	case "":
	default:
		fmt.Fprintf(w, "limits: %s\n", r.Limits)
	}
	switch r.Allowlist {
	case AllowlistNetNS:
		fmt.Fprintln(w, "allowlist: net-namespace (the egress proxy is the command's only route)")
	case AllowlistSupervisor:
		fmt.Fprintln(w, "allowlist: supervisor (inet connects reach only the egress proxy; Landlock tcp rules)")
	case AllowlistSupervisorOnly:
		fmt.Fprintln(w, "allowlist: supervisor-only (inet connects reach only the egress proxy; missing: egress-landlock)")
	case AllowlistUnavailable:
		fmt.Fprintln(w, "allowlist: unavailable (needs seccomp user notification and pidfd_getfd)")
	}
	switch r.Caches {
	case CachesOverlay:
		fmt.Fprintln(w, "caches: overlay (workspace-write writes the toolchain caches through an overlay; yours stay as they are)")
	case CachesVariables:
		fmt.Fprintln(w, "caches: variables (no mount view: GOCACHE, npm_config_cache, ... point at the sandbox's store; yours stay as they are)")
	case CachesReadOnly:
		fmt.Fprintln(w, "caches: read-only (no mount view, no Landlock)")
	}
	switch r.Loopback {
	case LoopbackNetNS:
		fmt.Fprintln(w, "loopback: net-namespace (the command's own)")
	case LoopbackOwnAddress:
		fmt.Fprintln(w, "loopback: own-address (an address of the command's own on the host's loopback, shown as 127.0.0.1)")
	case LoopbackRefused:
		fmt.Fprintln(w, "loopback: refused (needs seccomp user notification, and a net namespace or pidfd_getfd)")
	}
	for _, m := range modes.All() {
		mp := r.Modes[m.String()]
		switch {
		case mp.Enforcement == LevelNone:
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
