package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ErrUnsupported, which the entry points return off Linux, is its own
// sentinel and the standard one's match.
func TestErrUnsupported(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &SetupError{Detail: ErrUnsupported.Error(), Err: ErrUnsupported})
	require.ErrorIs(t, err, ErrUnsupported)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	msg := ErrUnsupported.Error()
	assert.Contains(t, msg, runtime.GOOS, "ErrUnsupported does not name the platform")
	assert.Contains(t, msg, "Linux only", "ErrUnsupported does not name Linux")
}
