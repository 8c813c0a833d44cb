//go:build !linux

package main

import "io"

// isTerminal is false off Linux: a generated token goes to a file.
func isTerminal(io.Writer) bool { return false }
