package tasks

// Status is the state of a background task.
type Status string

// Statuses.
const (
	StatusRunning   Status = "running"
	StatusStopping  Status = "stopping" // cancellation requested, not ended yet
	StatusCompleted Status = "completed"
	StatusKilled    Status = "killed"
	StatusFailed    Status = "failed"
)

// Ended reports whether s is a final status.
func (s Status) Ended() bool {
	return s == StatusCompleted || s == StatusKilled || s == StatusFailed
}

// Outcome is how a task ended: a final status and its detail (e.g.
// "exit code: 0", "signal: SIGTERM", "killed before exit"; "" for none).
type Outcome struct {
	Status Status
	Detail string
}

// Handle is what a producer (e.g. the bash tool) hands the runtime for one
// task: consuming reads, cancellation, completion. Implementations must be
// safe for concurrent use.
type Handle interface {
	// Read returns the model-facing text produced since the previous Read
	// ("" when there is none). The producer renders its own markers in it
	// (lossy-read notices, sandbox denials once settled).
	Read() string
	// Cancel asks the task to stop (for bash: SIGTERM to its process
	// group, SIGKILL to the whole tree after the grace) and returns at once.
	Cancel()
	// Done is closed when the task has ended and Outcome is final.
	Done() <-chan struct{}
	// Outcome is the task's end; only meaningful once Done is closed.
	Outcome() Outcome
}

// Notifier delivers completion notices into an owner's session, as durable
// context for its next model request (not a wake-up). The harness
// implements it.
type Notifier interface {
	Notify(owner string, text string)
}
