package sandbox

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImportsGoDown: the packages below sandbox import only packages further
// down (docs/DESIGN.md, Process model), never one above or beside them. It
// reads the import declarations only; a package missing from the table fails.
// An external test package (package x_test) may import its own package.
func TestImportsGoDown(t *testing.T) {
	const module = "github.com/dsh-sandbox/dsh-sandbox/"
	level := map[string]int{
		"sandbox/executor":            -1,
		"sandbox":                     0,
		"sandbox/internal/runner":     1,
		"sandbox/internal/supervisor": 1,
		"sandbox/internal/audit":      1,
		"sandbox/internal/limits":     1,
		"sandbox/internal/egress":     1,
		"sandbox/transaction":         1,
		"sandbox/internal/resolve":    2,
		"sandbox/internal/proc":       2,
		"sandbox/internal/facts":      2,
		"sandbox/internal/changes":    2,
		"sandbox/internal/mountplan":  2,
		"sandbox/internal/cachestore": 2,
		"sandbox/landlock":            3,
		"sandbox/seccomp":             3,
		"sandbox/modes":               4,
		// Leaves of the module, importing nothing of it.
		"sandbox/internal/credfiles": 5,
		"sandbox/internal/vouch":     5,
		"internal/printable":         5,
		"internal/signame":           5,
		"internal/testtime":          5,
		"internal/testhost":          5,
	}
	dirs, err := filepath.Glob("internal/*")
	require.NoError(t, err)
	dirs = append(dirs, "executor", "landlock", "seccomp", "modes", "transaction")
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		pkg := "sandbox/" + filepath.ToSlash(dir)
		from, ok := level[pkg]
		if !assert.True(t, ok, "%s is not in the layer table", pkg) {
			continue
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, file := range files {
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			require.NoError(t, err)
			for _, spec := range f.Imports {
				path, err := strconv.Unquote(spec.Path.Value)
				require.NoError(t, err)
				imp, ok := strings.CutPrefix(path, module)
				if !ok || imp == pkg && strings.HasSuffix(f.Name.Name, "_test") {
					continue // outside the module, or an example of the package itself
				}
				to, known := level[imp]
				assert.True(t, known && to > from, "%s imports %s: calls must go down", file, imp)
			}
		}
	}
}
