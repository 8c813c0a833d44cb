package executor

import "github.com/dsh-sandbox/dsh-sandbox/sandbox"

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
	Sandbox sandbox.Facts `json:"sandbox"`
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
