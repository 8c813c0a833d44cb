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

// The man page (docs/dsh-sandbox-run.1, installed by make install) documents
// every flag, and its OPTIONS section documents no flag that does not exist.
func TestManPage(t *testing.T) {
	b, err := os.ReadFile("../../docs/dsh-sandbox-run.1")
	require.NoError(t, err)
	page := string(b)
	o, err := parseArgs([]string{"--help"})
	require.NoError(t, err)
	o.flags.VisitAll(func(f *pflag.Flag) {
		roff := `\-\-` + strings.ReplaceAll(f.Name, "-", `\-`)
		assert.Contains(t, page, roff, "the man page does not document --%s", f.Name)
	})
	start, end := strings.Index(page, "\n.SH OPTIONS\n"), strings.Index(page, "\n.SH SECRETS\n")
	require.True(t, start >= 0 && end > start, "the man page has OPTIONS then SECRETS")
	item := regexp.MustCompile(`(?m)^\.TP\n\.B[IR]? (?:\\-h ", " )?\\-\\-((?:[a-z]|\\-)+)`)
	items := item.FindAllStringSubmatch(page[start:end], -1)
	require.NotEmpty(t, items)
	for _, m := range items {
		name := strings.ReplaceAll(m[1], `\-`, "-")
		assert.NotNil(t, o.flags.Lookup(name), "the man page documents --%s, which is no flag", name)
	}
	assert.Len(t, items, countFlags(o.flags), "one OPTIONS item per flag")
}

func countFlags(fs *pflag.FlagSet) int {
	n := 0
	fs.VisitAll(func(*pflag.Flag) { n++ })
	return n
}
