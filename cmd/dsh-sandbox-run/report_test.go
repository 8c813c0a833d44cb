package main

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
)

func TestExitCodeOf(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{&sandbox.SetupError{Detail: "no seccomp"}, 125},
		{&sandbox.ExecError{Detail: "x: No such file or directory", Err: syscall.ENOENT}, 127},
		{&sandbox.ExecError{Detail: "x: Permission denied", Err: syscall.EACCES}, 126},
		{fmt.Errorf("wrapped: %w", &sandbox.ExecError{Err: syscall.ENOENT}), 127},
		{errors.New("other"), 125},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, exitCodeOf(tt.err), tt.err.Error())
	}
}
