package limits

// The names and the usage the sandbox reports, on every platform.

// Mechanisms that enforce limits.
const (
	CgroupV1 = "cgroup-v1"
	CgroupV2 = "cgroup-v2"
	Rlimit   = "rlimit" // RLIMIT_NPROC in the command's user namespace: pids only
	None     = "none"
)

// Names of the limits, in Hit.Limit and the sandbox's missing names.
const (
	Pids   = "pids"
	Memory = "memory"
	CPU    = "cpu"
)

// Usage is what a command used, as far as its mechanism measures it (nil:
// unknown).
type Usage struct {
	PeakMemoryBytes *int64 `json:"peakMemoryBytes"`
	CPUTimeMs       *int64 `json:"cpuTimeMs"`
	PeakPids        *int64 `json:"peakPids"`
}

// Hit is a limit the command ran into: Count times (OOM kills, refused forks).
type Hit struct {
	Limit string
	Count int
}
