package sandbox

import (
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/changes"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/limits"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/runner"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Facts are what the sandbox saw of one command: how it was confined, what
// it refused, what it changed and what it used. Result, RunResult and the
// CLI's report carry the same Facts under the same names.
type Facts struct {
	// Mode is the mode the command actually ran under.
	Mode modes.Mode `json:"mode"`
	// Enforcement is how the command was confined (level none for
	// danger-full-access).
	Enforcement Enforcement `json:"enforcement"`
	// Denied is true iff the supervisor recorded a denial (a resource
	// limit hit, op "limit", is not one).
	Denied bool `json:"denied"`
	// Denials are the facts the supervisor recorded, in first-seen order:
	// at most MaxDenials distinct ones.
	Denials []Denial `json:"denials"`
	// DenialsDropped counts the denied calls left out of Denials because
	// MaxDenials distinct ones were already kept.
	DenialsDropped int `json:"denialsDropped"`
	// Changes are the paths in the writable roots the command created,
	// modified, removed, renamed or changed the mode of, in the order it
	// first named them, each with its root (at most MaxChanges per root;
	// confined modes with the supervisor only, see Change for what can be
	// missed).
	Changes []Change `json:"changes"`
	// ChangesDropped counts the changes left out of Changes;
	// ChangesDroppedByRoot splits it by writable root (only roots that
	// left some out).
	ChangesDropped       int            `json:"changesDropped"`
	ChangesDroppedByRoot map[string]int `json:"changesDroppedByRoot,omitempty"`
	// Usage is what the command used, where a cgroup of its own measured
	// it (nil otherwise); limits it hit are Denials with op "limit".
	Usage *Usage `json:"usage,omitempty"`
	// RunnerFailed (the contract's runnerFailed): the runner was lost
	// after the command started, killed from outside by a signal Kill did
	// not send, or failing; RunnerFailure says why. The command's session
	// was killed with it, and the exit code is the runner's death signal,
	// or 125 when nothing is known. (A runner that cannot confine before
	// the command starts is an error, never a result.)
	RunnerFailed  bool   `json:"runnerFailed,omitempty"`
	RunnerFailure string `json:"runnerFailure,omitempty"`
}

// Denial is one fact the supervisor observed: the sandbox refused Op on Path
// (a filesystem path or pathname unix socket) or Address (an address family,
// an abstract unix socket "@name", or a terminal ioctl), Count times. Its
// methods Target and Line render it.
type Denial = facts.Denial

// Suggestion is a denial's Suggest: the setting that allows exactly it, as
// a flag and a policy file line, or why no confined mode does.
type Suggestion = facts.Suggestion

// MaxDenials is how many distinct denials (op, path, address) a command's
// facts keep; the denied calls beyond them are only counted
// (Result.DenialsDropped), so a command denied on millions of distinct paths
// cannot grow the supervisor's memory or the report without bound.
const MaxDenials = facts.MaxDenials

// OpLimit is the op of a resource-limit fact (a limit the command hit, not
// a denial: it does not set Facts.Denied).
const OpLimit = facts.OpLimit

// SyscallProxy is the Syscall of a denial the egress proxy made: a
// destination a command asked the proxy for that the allowlist refuses.
const SyscallProxy = facts.SyscallProxy

// OpResolve and SyscallDNS name a denial of the stub resolver of a
// command's net namespace: a name the allowlist refuses, looked up.
const (
	OpResolve  = facts.OpResolve
	SyscallDNS = facts.SyscallDNS
)

// Change is one path in the writable roots a command changed: Op created,
// modified, removed, renamed (From is the old path) or mode (only the
// permission bits), with what Path is at the end (Type, Size of a file,
// Mode). The supervisor records the state of each path the first time an
// allowed write-like call names it, before the call runs, and compares it
// with the path's state once the command's processes are gone: no scan of
// the workspace. It cannot see writes through a descriptor the command did
// not open itself (an inherited one), the entries of a directory renamed
// or removed as a whole (the directory is reported), a chmod of a path no
// write-like call named, or a rewrite that keeps the size and the
// modification time. Only the confined modes, with the supervisor, report
// changes; danger-full-access reports none.
type Change = changes.Change

// MaxChanges is how many changes a result lists per writable root; the
// rest are counted (Result.ChangesDropped, ChangesDroppedByRoot).
const MaxChanges = changes.MaxChanges

// Ops of a Change.
const (
	ChangeCreated  = changes.OpCreated
	ChangeModified = changes.OpModified
	ChangeRemoved  = changes.OpRemoved
	ChangeRenamed  = changes.OpRenamed
	ChangeMode     = changes.OpMode
)

// Namespaces says which namespaces a sandboxed command runs in.
type Namespaces = runner.Namespaces

// Enforcement levels.
const (
	levelFull        = "full"        // every guarantee of the mode holds
	levelPartial     = "partial"     // confined, but Missing lists guarantees that do not hold
	levelNone        = "none"        // danger-full-access: no confinement by design
	levelUnavailable = "unavailable" // the mode cannot run on this host (probe only)
)

// Layer names, in the order they are applied.
const (
	layerUserNS        = "user-namespace"
	layerMountView     = "mount-view"
	layerPIDNS         = "pid-namespace"
	layerNetNS         = "net-namespace"
	layerIPCNS         = "ipc-namespace"
	layerUTSNS         = "uts-namespace"
	layerLandlock      = "landlock"
	layerSeccomp       = "seccomp"
	layerSeccompNotify = "seccomp-notify"
	// layerEgressProxy: the network allowlist's egress proxy, the
	// command's only way out (after the other layers: it is no layer of
	// confinement, but the one way through them).
	layerEgressProxy = "egress-proxy"
)

// Guarantees that a host may be unable to give; they appear in
// Enforcement.Missing.
const (
	// No mount view and no Landlock rules leaving every existing protected
	// path out of the writable roots (those are made only without user
	// notification): while the command runs, protected paths inside the
	// writable roots are guarded only by the supervisor's (raceable)
	// pre-denial; what it changed there is undone by the post-run audit.
	missingProtectedPaths = "protected-paths"
	// No mount view and no supervisor performing them: Landlock does not
	// cover chmod, chown, utimes, xattr and inode-flag changes on files
	// outside the writable roots. (With user notification the supervisor
	// performs every such change without a mount view, on the files the
	// policy lets the command change: see sandbox/internal/supervisor.)
	missingMetadataWrites = "metadata-writes"
	// No Landlock, and no mount view with a fresh /proc: device nodes other
	// than the sinks can be opened (a read-only mount does not stop writes
	// to them; the mount view makes every mount nodev, but the host's /proc
	// reaches host processes' open files, terminals included, through
	// /proc/PID/fd).
	missingDeviceWrites = "device-writes"
	// No pid namespace: host processes are visible in /proc (e.g. cmdline).
	missingProcessVisibility = "process-visibility"
	// No pid namespace, Landlock ABI < 6 and no seccomp user notification:
	// host processes of the same user can be signalled. (With notification
	// the supervisor lets signals reach only the sandbox's processes, see
	// sandbox/internal/supervisor.)
	missingSignalIsolation = "signal-isolation"
	// No ipc namespace and no supervisor to judge IPC calls: host System V
	// IPC objects and POSIX message queues are reachable. (With one, a
	// command reaches only the objects it made: ipc_linux.go in
	// sandbox/internal/supervisor.)
	missingIPCIsolation = "ipc-isolation"
	// No seccomp user notification: denials are enforced but not reported,
	// and connect() to any unix socket is denied.
	missingDenialFacts = "denial-facts"
	// No mount view: the deny-read paths (Policy.DenyRead) are hidden by
	// Landlock alone; the names of the entries of a masked directory stay
	// listable, and a masked path in a writable root cannot be hidden at
	// all (such a policy then fails to start).
	missingSecretMasksMount = "secret-masks-mount"
	// No Landlock: the deny-read paths are hidden by the mount view alone.
	missingSecretMasksLandlock = "secret-masks-landlock"
	// A limit the policy sets (non-zero) that this host cannot enforce for
	// the caller: pids without a cgroup and without RLIMIT_NPROC in a user
	// namespace of the command's; memory and CPU without a cgroup.
	missingPidsLimit   = "pids-limit"
	missingMemoryLimit = "memory-limit"
	missingCPULimit    = "cpu-limit"
	// Under a network allowlist, no net namespace and Landlock ABI < 4:
	// only the supervisor's connect check keeps inet connections to the
	// egress proxy and the allowlist's hosts (with a net namespace the
	// kernel gives the command no route out; with ABI 4 Landlock also
	// limits its TCP connects to their ports).
	missingEgressLandlock = "egress-landlock"
)

// Limit mechanisms (Enforcement.Limits, the probe's "limits").
const (
	limitsCgroupV1 = limits.CgroupV1 // a cgroup v1 group per command (pids, memory, cpu, cpuacct, freezer)
	limitsCgroupV2 = limits.CgroupV2 // a cgroup v2 group per command
	limitsRlimit   = limits.Rlimit   // RLIMIT_NPROC in the command's user namespace: pids only
	limitsNone     = limits.None     // nothing enforces the limits
)

// Usage is what a command used, where its limits' mechanism measures it
// (a cgroup): peak memory, CPU time (user+system), peak pids; nil fields are
// unknown.
type Usage = limits.Usage

// withLimits adds the limits' mechanism and the limits it cannot enforce
// to e: mech is limitsCgroupV1/V2, limitsRlimit or limitsNone.
func withLimits(e Enforcement, l modes.Limits, mech string) Enforcement {
	if !l.Any() {
		return e
	}
	e.Limits = mech
	cgroup := mech == limitsCgroupV1 || mech == limitsCgroupV2
	miss := func(cond bool, name string) {
		if cond {
			e.Missing = append(e.Missing, name)
		}
	}
	miss(l.MaxPids > 0 && !cgroup && mech != limitsRlimit, missingPidsLimit)
	miss(l.MaxMemory > 0 && !cgroup, missingMemoryLimit)
	miss(l.MaxCPU > 0 && !cgroup, missingCPULimit)
	if e.Level == levelFull && len(e.Missing) > 0 {
		e.Level = levelPartial
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
	// Level is "full" (every guarantee of the mode holds), "partial"
	// (confined, but Missing lists guarantees that do not hold) or "none"
	// (danger-full-access).
	Level string `json:"level"`
	// Layers are the layers applied, in order: "user-namespace",
	// "mount-view", "pid-namespace", "net-namespace", "ipc-namespace",
	// "uts-namespace", "landlock", "seccomp", "seccomp-notify",
	// "egress-proxy" (docs/report.md).
	Layers []string `json:"layers"`
	// Missing are the guarantees this host could not give
	// ("protected-paths", "memory-limit", ...; docs/report.md).
	Missing     []string `json:"missing"`
	LandlockABI int      `json:"landlockAbi"`
	// Reasons explain absent layers, e.g. why user namespaces were unavailable.
	Reasons []string `json:"reasons,omitempty"`
	// Limits names what enforces the policy's resource limits
	// ("cgroup-v1", "cgroup-v2", "rlimit", "none"); empty when
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
// hid it ("mount-view", "landlock"). Sanitized: the command read a
// read-only copy of this credential file without its secrets instead
// (modes.Policy.CredentialFiles).
type Masked struct {
	Path      string   `json:"path"`
	Layers    []string `json:"layers"`
	Sanitized bool     `json:"sanitized,omitempty"`
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
		return Enforcement{Level: levelNone, Layers: []string{}, Missing: []string{}}
	}
	e := Enforcement{Layers: []string{}, Missing: []string{}, LandlockABI: l.landlockABI}
	add := func(on bool, name string) {
		if on {
			e.Layers = append(e.Layers, name)
		}
	}
	add(l.ns.User, layerUserNS)
	add(l.mountView, layerMountView)
	add(l.ns.PID && l.freshProc, layerPIDNS)
	add(l.ns.Net, layerNetNS)
	add(l.ns.IPC, layerIPCNS)
	add(l.ns.UTS, layerUTSNS)
	add(l.landlockABI > 0, layerLandlock)
	add(l.seccomp, layerSeccomp)
	add(l.notify, layerSeccompNotify)

	miss := func(cond bool, name string) {
		if cond {
			e.Missing = append(e.Missing, name)
		}
	}
	pidIsolated := l.ns.PID && l.freshProc
	miss(!l.mountView && !(l.landlockABI > 0 && l.carved) && m == modes.WorkspaceWrite, missingProtectedPaths)
	miss(!l.mountView && !l.metadata, missingMetadataWrites)
	miss(l.landlockABI == 0 && !(l.mountView && pidIsolated), missingDeviceWrites)
	miss(!pidIsolated, missingProcessVisibility)
	miss(!pidIsolated && l.landlockABI < 6 && !l.notify, missingSignalIsolation)
	miss(!l.ns.IPC && !l.notify, missingIPCIsolation)
	miss(!l.notify, missingDenialFacts)
	miss(l.secrets && !l.mountView, missingSecretMasksMount)
	miss(l.secrets && l.landlockABI == 0, missingSecretMasksLandlock)
	e.Level = levelFull
	if len(e.Missing) > 0 {
		e.Level = levelPartial
	}
	return e
}
