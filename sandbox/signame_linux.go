//go:build linux

package sandbox

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName is sig's name ("SIGKILL"), or "" when unknown.
func signalName(sig syscall.Signal) string { return unix.SignalName(sig) }
