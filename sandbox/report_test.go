package sandbox

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestExitCodeOf(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{&SetupError{Detail: "no seccomp"}, 125},
		{&ExecError{Detail: "x: No such file or directory", Err: syscall.ENOENT}, 127},
		{&ExecError{Detail: "x: Permission denied", Err: syscall.EACCES}, 126},
		{fmt.Errorf("wrapped: %w", &ExecError{Err: syscall.ENOENT}), 127},
		{errors.New("other"), 125},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ExitCodeOf(tt.err), tt.err.Error())
	}
}
