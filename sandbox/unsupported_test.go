package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// ErrUnsupported, which the entry points return off Linux, is its own
// sentinel and the standard one's match.
func TestErrUnsupported(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &SetupError{Detail: ErrUnsupported.Error(), Err: ErrUnsupported})
	if !errors.Is(err, ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("errors.Is(%v, ErrUnsupported / errors.ErrUnsupported) = false", err)
	}
	if msg := ErrUnsupported.Error(); !strings.Contains(msg, runtime.GOOS) || !strings.Contains(msg, "Linux only") {
		t.Errorf("ErrUnsupported says %q: it names neither the platform nor Linux", msg)
	}
}
