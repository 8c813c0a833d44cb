package sandbox

import "github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"

// RunResult is how a command ended: its output, its status, and what the
// sandbox did.
type RunResult struct {
	Stdout Output `json:"stdout"`
	Stderr Output `json:"stderr"`
	// ExitCode is the exit status, or 128+N when the command died of
	// signal N.
	ExitCode int `json:"exitCode"`
	// Signal names the signal that killed the command ("SIGTERM"), or "".
	Signal string `json:"signal,omitempty"`
	// TimedOut: the timeout fired while the command ran (it was then
	// terminated; it may still have exited 0).
	TimedOut bool `json:"timedOut"`
	// TimeoutMs is the effective timeout (0 for background commands).
	TimeoutMs float64 `json:"timeoutMs"`
	// Aborted: the context was cancelled while the command ran.
	Aborted bool `json:"aborted"`
	// Killed: Kill was called on the background command while it ran.
	Killed bool `json:"killed,omitempty"`
	// Sandbox is what the sandbox did.
	Sandbox Facts `json:"sandbox"`
}

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
	// first named them (at most MaxChanges; confined modes with the
	// supervisor only, see Change for what can be missed).
	Changes []Change `json:"changes"`
	// ChangesDropped counts the changes left out of Changes.
	ChangesDropped int `json:"changesDropped"`
	// Usage is what the command used, where a cgroup of its own measured
	// it (nil otherwise); limits it hit are Denials with op "limit".
	Usage *Usage `json:"usage,omitempty"`
	// RunnerLost says why, when the runner was lost after the command
	// started (killed from outside by a signal Kill did not send, or it
	// failed): the command's session was killed with it, and the exit
	// code is the runner's death signal, or 125 when nothing is known. (A
	// runner that cannot confine before the command starts is an error,
	// never a result.)
	RunnerLost string `json:"runnerLost,omitempty"`
}

// Status is the state of a background process.
type Status string

// Statuses of a Process.
const (
	StatusRunning  Status = "running"
	StatusStopping Status = "stopping" // Kill was called; it has not ended yet
	StatusExited   Status = "exited"   // it ended; the result is final
)

// Delta is the output of a background process since the previous Read.
type Delta struct {
	Stdout, Stderr string
	// Lossy: some unread bytes had already fallen out of the in-memory
	// tail; SpillPaths lists the spill files that still hold everything.
	Lossy      bool
	SpillPaths []string
}
