package signame

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// known is sig's name ("SIGKILL"), or "" when unknown.
func known(sig syscall.Signal) string { return unix.SignalName(sig) }
