//go:build !linux

package sandbox

import "syscall"

// signalName: off Linux no command runs, so no signal ends one.
func signalName(syscall.Signal) string { return "" }
