package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The man page (docs/dsh-sandbox-mcp.1, installed by make install) has one
// OPTIONS item per flag, and none for a flag that does not exist.
func TestManPage(t *testing.T) {
	b, err := os.ReadFile("../../docs/dsh-sandbox-mcp.1")
	require.NoError(t, err)
	page := string(b)
	o, err := parseArgs([]string{"--help"})
	require.NoError(t, err)
	start, end := strings.Index(page, "\n.SH OPTIONS\n"), strings.Index(page, "\n.SH PROGRESS\n")
	require.True(t, start >= 0 && end > start, "the man page has OPTIONS then PROGRESS")
	item := regexp.MustCompile(`(?m)^\.TP\n\.B[IR]? (?:\\-h ", " )?\\-\\-((?:[a-z]|\\-)+)`)
	items := item.FindAllStringSubmatch(page[start:end], -1)
	documented := map[string]bool{}
	for _, m := range items {
		name := strings.ReplaceAll(m[1], `\-`, "-")
		documented[name] = true
		assert.NotNil(t, o.flags.Lookup(name), "the man page documents --%s, which is no flag", name)
	}
	n := 0
	o.flags.VisitAll(func(f *pflag.Flag) {
		n++
		assert.True(t, documented[f.Name], "the man page's OPTIONS lack --%s", f.Name)
	})
	assert.Len(t, items, n, "one OPTIONS item per flag")
}
