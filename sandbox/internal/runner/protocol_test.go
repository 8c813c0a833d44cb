package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSpecTokens(t *testing.T) {
	b := SpecTokens([][2]string{{"confine", "1"}, {"why", "a b"}}, []string{"ro", "/"})
	assert.Equal(t, "dsh2\x00confine\x001\x00why\x00a b\x00ops\x00ro\x00/\x00", string(b))
}
