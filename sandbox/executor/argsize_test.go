//go:build linux

package executor

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
)

func TestCommandFits(t *testing.T) {
	env := []string{"PATH=/usr/bin", "HOME=/root"}
	tests := []struct {
		name string
		cmd  string
		env  []string
		want bool
	}{
		{"short", "echo hi", env, true},
		{"at the per-argument limit", strings.Repeat("x", maxArgStrlen-1), env, true},
		{"over the per-argument limit", strings.Repeat("x", maxArgStrlen), env, false},
		{"1 MiB", strings.Repeat("x", 1<<20), env, false},
		{"under the per-argument limit, but the environment leaves no room", strings.Repeat("x", maxArgStrlen-1), bigEnv((argMax()-60000)/100012, 100000), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, commandFits("/bin/bash", tt.cmd, tt.env))
			assert.NoError(t, checkExecEnv("/bin/bash", tt.env), "the environment itself fits")
		})
	}
}

func bigEnv(n, size int) []string {
	env := make([]string, n)
	for i := range env {
		env[i] = fmt.Sprintf("V%d=%s", i, strings.Repeat("v", size))
	}
	return env
}

func TestCheckExecEnv(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want string // "" = accepted
	}{
		{"small", []string{"A=b"}, ""},
		{"one variable at the limit", []string{"A=" + strings.Repeat("b", maxArgStrlen-3)}, ""},
		{"one variable over the limit", []string{"A=" + strings.Repeat("b", maxArgStrlen-2)}, `environment variable "A" is 131072 bytes long`},
		{"over ARG_MAX in total", bigEnv(argMax()/100000+1, 100000), "ARG_MAX"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkExecEnv("/bin/bash", tt.env)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidRequest)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestResolveRejectsOversizedEnv(t *testing.T) {
	e := newTestExecutor(t, Config{})
	_, err := e.Resolve(Request{Command: "true", Env: map[string]string{"BIG": strings.Repeat("b", 200000)}})
	assert.ErrorIs(t, err, ErrInvalidRequest)
	_, err = e.Resolve(Request{Command: strings.Repeat("x", 1<<20)})
	assert.NoError(t, err, "a long command is not an error: it goes through a memfd")
}

func TestResourceErrorKinds(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EAGAIN, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM} {
		wrapped := fmt.Errorf("pipe2: %w", &os.SyscallError{Syscall: "pipe2", Err: errno})
		re := sandbox.ResourceErrorOf("pipe", wrapped)
		require.NotNil(t, re, "%v", errno)
		var err error = re
		assert.ErrorIs(t, err, sandbox.ErrResourceExhausted)
		assert.ErrorIs(t, err, errno)
		var su *SandboxUnavailableError
		assert.False(t, errors.As(err, &su), "resource exhaustion is not an unavailable sandbox")
		assert.NotContains(t, err.Error(), "danger-full-access")
		assert.Contains(t, err.Error(), "pipe: "+errno.Error())
	}
	for _, errno := range []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.ENOENT, syscall.E2BIG} {
		assert.Nil(t, sandbox.ResourceErrorOf("exec", errno), "%v is not resource exhaustion", errno)
	}
}
