package sandbox

import (
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/limits"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/runner"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Namespaces says which namespaces a sandboxed command runs in.
type Namespaces = runner.Namespaces

// Enforcement levels.
const (
	LevelFull        = "full"        // every guarantee of the mode holds
	LevelPartial     = "partial"     // confined, but Missing lists guarantees that do not hold
	LevelNone        = "none"        // danger-full-access: no confinement by design
	LevelUnavailable = "unavailable" // the mode cannot run on this host (probe only)
)

// Layer names, in the order they are applied.
const (
	LayerUserNS        = "user-namespace"
	LayerMountView     = "mount-view"
	LayerPIDNS         = "pid-namespace"
	LayerNetNS         = "net-namespace"
	LayerIPCNS         = "ipc-namespace"
	LayerUTSNS         = "uts-namespace"
	LayerLandlock      = "landlock"
	LayerSeccomp       = "seccomp"
	LayerSeccompNotify = "seccomp-notify"
	// LayerEgressProxy: the network allowlist's egress proxy, the
	// command's only way out (after the other layers: it is no layer of
	// confinement, but the one way through them).
	LayerEgressProxy = "egress-proxy"
)

// Guarantees that a host may be unable to give; they appear in
// Enforcement.Missing.
const (
	// No mount view and no Landlock rules leaving every existing protected
	// path out of the writable roots (those are made only without user
	// notification): while the command runs, protected paths inside the
	// writable roots are guarded only by the supervisor's (raceable)
	// pre-denial; what it changed there is undone by the post-run audit.
	MissingProtectedPaths = "protected-paths"
	// No mount view and no supervisor performing them: Landlock does not
	// cover chmod, chown, utimes, xattr and inode-flag changes on files
	// outside the writable roots. (With user notification the supervisor
	// performs every such change without a mount view, on the files the
	// policy lets the command change: see sandbox/internal/supervisor.)
	MissingMetadataWrites = "metadata-writes"
	// No Landlock, and no mount view with a fresh /proc: device nodes other
	// than the sinks can be opened (a read-only mount does not stop writes
	// to them; the mount view makes every mount nodev, but the host's /proc
	// reaches host processes' open files, terminals included, through
	// /proc/PID/fd).
	MissingDeviceWrites = "device-writes"
	// No pid namespace: host processes are visible in /proc (e.g. cmdline).
	MissingProcessVisibility = "process-visibility"
	// No pid namespace, Landlock ABI < 6 and no seccomp user notification:
	// host processes of the same user can be signalled. (With notification
	// the supervisor lets signals reach only the sandbox's processes, see
	// sandbox/internal/supervisor.)
	MissingSignalIsolation = "signal-isolation"
	// No ipc namespace and no supervisor to judge IPC calls: host System V
	// IPC objects and POSIX message queues are reachable. (With one, a
	// command reaches only the objects it made: ipc_linux.go in
	// sandbox/internal/supervisor.)
	MissingIPCIsolation = "ipc-isolation"
	// No seccomp user notification: denials are enforced but not reported,
	// and connect() to any unix socket is denied.
	MissingDenialFacts = "denial-facts"
	// No mount view: the deny-read paths (Policy.DenyRead) are hidden by
	// Landlock alone; the names of the entries of a masked directory stay
	// listable, and a masked path in a writable root cannot be hidden at
	// all (such a policy then fails to start).
	MissingSecretMasksMount = "secret-masks-mount"
	// No Landlock: the deny-read paths are hidden by the mount view alone.
	MissingSecretMasksLandlock = "secret-masks-landlock"
	// A limit the policy sets (non-zero) that this host cannot enforce for
	// the caller: pids without a cgroup and without RLIMIT_NPROC in a user
	// namespace of the command's; memory and CPU without a cgroup.
	MissingPidsLimit   = "pids-limit"
	MissingMemoryLimit = "memory-limit"
	MissingCPULimit    = "cpu-limit"
	// Under a network allowlist, no net namespace and Landlock ABI < 4:
	// only the supervisor's connect check keeps inet connections to the
	// egress proxy and the allowlist's hosts (with a net namespace the
	// kernel gives the command no route out; with ABI 4 Landlock also
	// limits its TCP connects to their ports).
	MissingEgressLandlock = "egress-landlock"
)

// Limit mechanisms (Enforcement.Limits, the probe's "limits").
const (
	LimitsCgroupV1 = limits.CgroupV1 // a cgroup v1 group per command (pids, memory, cpu, cpuacct, freezer)
	LimitsCgroupV2 = limits.CgroupV2 // a cgroup v2 group per command
	LimitsRlimit   = limits.Rlimit   // RLIMIT_NPROC in the command's user namespace: pids only
	LimitsNone     = limits.None     // nothing enforces the limits
)

// Usage is what a command used, where its limits' mechanism measures it
// (a cgroup): peak memory, CPU time (user+system), peak pids; nil fields are
// unknown.
type Usage = limits.Usage

// withLimits adds the limits' mechanism and the limits it cannot enforce
// to e: mech is LimitsCgroupV1/V2, LimitsRlimit or LimitsNone.
func withLimits(e Enforcement, l modes.Limits, mech string) Enforcement {
	if !l.Any() {
		return e
	}
	e.Limits = mech
	cgroup := mech == LimitsCgroupV1 || mech == LimitsCgroupV2
	miss := func(cond bool, name string) {
		if cond {
			e.Missing = append(e.Missing, name)
		}
	}
	miss(l.MaxPids > 0 && !cgroup && mech != LimitsRlimit, MissingPidsLimit)
	miss(l.MaxMemory > 0 && !cgroup, MissingMemoryLimit)
	miss(l.MaxCPU > 0 && !cgroup, MissingCPULimit)
	if e.Level == LevelFull && len(e.Missing) > 0 {
		e.Level = LevelPartial
	}
	return e
}

// No host lacks these any more, so they are not in the list above:
//   - truncation outside the roots (formerly "truncate"): Landlock
//     handles it from ABI 3 and the mount view's read-only mounts always;
//     without either, the seccomp filter refuses truncate(2) and every open
//     with O_TRUNC and a non-writable access mode — in the kernel without
//     user notification, else by the supervisor from the call's registers
//     (never a continued call, which could be raced) — and openat2 answers
//     ENOSYS; ftruncate needs an fd open for writing, which Landlock checks
//     on every ABI. The price on such hosts: truncate(2) fails (EACCES)
//     inside the roots too.
//   - opens with access mode 3 (ioctl only), for which Landlock requires no
//     right: refused the same way wherever no mount view (read-only, nodev)
//     backs Landlock.

// Enforcement describes how a command was (or would be) confined.
type Enforcement struct {
	Level       string   `json:"level"`
	Layers      []string `json:"layers"`
	Missing     []string `json:"missing"`
	LandlockABI int      `json:"landlockAbi"`
	// Reasons explain absent layers, e.g. why user namespaces were unavailable.
	Reasons []string `json:"reasons,omitempty"`
	// Limits names what enforces the policy's resource limits
	// (LimitsCgroupV1, LimitsCgroupV2, LimitsRlimit, LimitsNone); empty when
	// the policy sets none.
	Limits string `json:"limits,omitempty"`
	// Masked lists the deny-read paths that existed when the command
	// started and were hidden from it, with the layers that hid each.
	Masked []Masked `json:"masked,omitempty"`
	// Caches are the toolchain caches (modes.Policy.Caches) the command
	// wrote through an overlay whose upper layer is the sandbox's: the
	// user's own cache stayed as it was. Those of the policy not listed
	// stayed read-only (no mount view, an overlay the host refused, or
	// another command using that cache).
	Caches []string `json:"caches,omitempty"`
}

// Masked is a deny-read path hidden from a command, and the layers that
// hid it (LayerMountView, LayerLandlock).
type Masked struct {
	Path   string   `json:"path"`
	Layers []string `json:"layers"`
}

// layers is what a runner actually applied (or a probe found possible).
type layers struct {
	ns          Namespaces
	mountView   bool
	freshProc   bool
	landlockABI int
	seccomp     bool
	notify      bool
	metadata    bool // the supervisor performs the metadata changes (seccomp.Spec.Metadata)
	carved      bool // Landlock leaves every protected path out of the writable roots
	secrets     bool // the policy has deny-read paths
}

// assess turns applied layers into an Enforcement for mode m.
func assess(m modes.Mode, l layers) Enforcement {
	if !m.Confines() {
		return Enforcement{Level: LevelNone, Layers: []string{}, Missing: []string{}}
	}
	e := Enforcement{Layers: []string{}, Missing: []string{}, LandlockABI: l.landlockABI}
	add := func(on bool, name string) {
		if on {
			e.Layers = append(e.Layers, name)
		}
	}
	add(l.ns.User, LayerUserNS)
	add(l.mountView, LayerMountView)
	add(l.ns.PID && l.freshProc, LayerPIDNS)
	add(l.ns.Net, LayerNetNS)
	add(l.ns.IPC, LayerIPCNS)
	add(l.ns.UTS, LayerUTSNS)
	add(l.landlockABI > 0, LayerLandlock)
	add(l.seccomp, LayerSeccomp)
	add(l.notify, LayerSeccompNotify)

	miss := func(cond bool, name string) {
		if cond {
			e.Missing = append(e.Missing, name)
		}
	}
	pidIsolated := l.ns.PID && l.freshProc
	miss(!l.mountView && !(l.landlockABI > 0 && l.carved) && m == modes.WorkspaceWrite, MissingProtectedPaths)
	miss(!l.mountView && !l.metadata, MissingMetadataWrites)
	miss(l.landlockABI == 0 && !(l.mountView && pidIsolated), MissingDeviceWrites)
	miss(!pidIsolated, MissingProcessVisibility)
	miss(!pidIsolated && l.landlockABI < 6 && !l.notify, MissingSignalIsolation)
	miss(!l.ns.IPC && !l.notify, MissingIPCIsolation)
	miss(!l.notify, MissingDenialFacts)
	miss(l.secrets && !l.mountView, MissingSecretMasksMount)
	miss(l.secrets && l.landlockABI == 0, MissingSecretMasksLandlock)
	e.Level = LevelFull
	if len(e.Missing) > 0 {
		e.Level = LevelPartial
	}
	return e
}
