//go:build !linux

package signame

import "syscall"

// known: off Linux no command runs, so no signal ends one.
func known(syscall.Signal) string { return "" }
