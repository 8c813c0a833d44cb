//go:build linux

package signame

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestName: the conventional names.
func TestName(t *testing.T) {
	for sig, want := range map[syscall.Signal]string{
		syscall.SIGKILL: "SIGKILL",
		syscall.SIGTERM: "SIGTERM",
		syscall.SIGSEGV: "SIGSEGV",
		syscall.SIGINT:  "SIGINT",
	} {
		assert.Equal(t, want, Name(sig), "%d", int(sig))
	}
}
