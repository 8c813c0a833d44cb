//go:build !unix

package main

// The --report file's open flags: none of these exist here, where the
// sandbox refuses every command anyway (sandbox.ErrUnsupported).
const (
	oNoctty   = 0
	oNonblock = 0
	oNofollow = 0
)
