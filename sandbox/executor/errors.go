package executor

import (
	"errors"
	"fmt"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// CodeSandboxUnavailable is the code of a [SandboxUnavailableError].
const CodeSandboxUnavailable = "SANDBOX_UNAVAILABLE"

// SandboxUnavailableError reports that a confined mode was requested but the
// sandbox could not confine the command, so it was refused: the command
// never ran. Its message is the contract's, byte for byte.
type SandboxUnavailableError struct {
	// Mode is the mode that was requested.
	Mode modes.Mode
	// Detail is the runner's failure line or the runner's spawn error, ""
	// when there is none.
	Detail string
	// Err is the underlying error (a *SetupError), or nil.
	Err error
}

// Code returns CodeSandboxUnavailable.
func (e *SandboxUnavailableError) Code() string { return CodeSandboxUnavailable }

func (e *SandboxUnavailableError) Error() string {
	msg := fmt.Sprintf("sandbox mode %q is requested but no sandbox backend is usable on this host; "+
		"refusing to run the command unconfined. Install bubblewrap or run a Landlock-enforcing kernel (Linux), "+
		"ensure sandbox-exec is usable (macOS), or ensure the ACL restricted-token runner can start (Windows) "+
		"— otherwise switch the consumer to danger-full-access.", e.Mode.String())
	if e.Detail != "" {
		msg += " Runner failure: " + e.Detail
	}
	return msg
}

func (e *SandboxUnavailableError) Unwrap() error { return e.Err }

// ErrAborted is wrapped by the error of a Run whose context was cancelled
// (together with the context's error).
var ErrAborted = errors.New("command aborted")

// ErrClosed is returned by an Executor after Close.
var ErrClosed = errors.New("sandbox: executor closed")

// ErrInvalidRequest is wrapped by every error Resolve returns for a request
// it refuses.
var ErrInvalidRequest = errors.New("invalid request")

func invalidf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, a...))
}
