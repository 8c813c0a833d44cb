package sandbox

import (
	"errors"
	"fmt"
	"runtime"
)

// ErrResourceExhausted is matched (errors.Is) by every *ResourceError.
var ErrResourceExhausted = errors.New("out of resources")

// ResourceError reports that a command could not be started because this
// process or the host ran out of processes (EAGAIN), file descriptors
// (EMFILE, ENFILE) or memory (ENOMEM) while spawning it: the command never
// ran, and the same request may succeed once resources are free. The
// sandbox itself is usable: this is never a *SandboxUnavailableError.
type ResourceError struct {
	// Op is what failed ("pipe", "socketpair", "fork", "exec bash", ...).
	Op string
	// Err is the errno.
	Err error
}

func (e *ResourceError) Error() string {
	return fmt.Sprintf("cannot start the command: out of resources (%s: %v); nothing ran. "+
		"Retry once other commands have ended or resources are free", e.Op, e.Err)
}

// Unwrap returns the errno.
func (e *ResourceError) Unwrap() error { return e.Err }

// Is reports whether target is ErrResourceExhausted.
func (e *ResourceError) Is(target error) bool { return target == ErrResourceExhausted }

// ErrEgressClosed is returned for a command started on a closed EgressProxy.
var ErrEgressClosed = errors.New("sandbox: the egress proxy is closed")

// ErrUnsupported is matched (errors.Is) by the error of every entry point
// that would run a command on a platform the sandbox does not support: it
// confines with Landlock, seccomp and namespaces, so it runs on Linux only.
// The package compiles everywhere, so that a cross-platform harness can link
// it and get this error at run time: off Linux, executor.New returns it,
// Cmd.Start returns a *SetupError wrapping it, and Probe reports
// Confined false with its message as every mode's error. It is
// errors.ErrUnsupported, so code that checks the standard one matches too.
var ErrUnsupported error = unsupportedError{}

type unsupportedError struct{}

func (unsupportedError) Error() string {
	return "sandbox: unsupported platform " + runtime.GOOS + ": dsh-sandbox confines commands on Linux only"
}

// Is reports whether target is errors.ErrUnsupported.
func (unsupportedError) Is(target error) bool { return target == errors.ErrUnsupported }

// ErrTransactionUnavailable is the cause of the SetupError of a command
// given a transaction (Cmd.Transaction) this host cannot run: no mount view
// (user or mount namespaces refused) or no overlayfs in a user namespace
// (before Linux 5.11). The command never ran: it is never run writing to
// the workspace directly instead.
var ErrTransactionUnavailable = errors.New(transactionUnavailable)

// transactionUnavailable starts the detail of such a SetupError.
const transactionUnavailable = "transaction unavailable"
