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

// Facts are the sandbox's side of a result.
type Facts struct {
	// Mode is the mode the command actually ran under.
	Mode modes.Mode `json:"mode"`
	// Denied is true iff the supervisor recorded a denial (a resource
	// limit hit, op "limit", is not one).
	Denied bool `json:"denied"`
	// Denials are the denials, in first-seen order (at most MaxDenials).
	Denials []Denial `json:"denials"`
	// DenialsDropped counts the denied calls left out of Denials because
	// MaxDenials distinct ones were already kept.
	DenialsDropped int `json:"denialsDropped,omitempty"`
	// Changes are the paths in the writable roots the command changed, in
	// the order it first named them (at most MaxChanges; see Change).
	Changes []Change `json:"changes,omitempty"`
	// ChangesDropped counts the changes left out of Changes.
	ChangesDropped int `json:"changesDropped,omitempty"`
	// Enforcement is how the command was confined (level none for
	// danger-full-access).
	Enforcement Enforcement `json:"enforcement"`
	// Usage is what the command used, where a cgroup of its own measured
	// it (absent otherwise); limits it hit are Denials with op "limit".
	Usage *Usage `json:"usage,omitempty"`
	// RunnerFailed: the runner was lost after the command started (killed
	// from outside, or it failed); RunnerFailure says why. The command's
	// session was killed; ExitCode is the runner's death signal, or 125
	// when nothing is known. (A runner that cannot confine before the
	// command starts is an error, *SandboxUnavailableError, never a result.)
	RunnerFailed  bool   `json:"runnerFailed,omitempty"`
	RunnerFailure string `json:"runnerFailure,omitempty"`
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
