//go:build unix

package main

import "syscall"

// The --report file's open flags (see openReport).
const (
	oNoctty   = syscall.O_NOCTTY
	oNonblock = syscall.O_NONBLOCK
	oNofollow = syscall.O_NOFOLLOW
)
