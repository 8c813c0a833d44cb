package executor

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// spillInto returns a spillFunc creating numbered files in dir, and the
// list of paths it created.
func spillInto(dir string) (spillFunc, *[]string) {
	var created []string
	return func(stream string) (*os.File, func(), error) {
		p := filepath.Join(dir, stream+".log")
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, nil, err
		}
		created = append(created, p)
		return f, func() { os.Remove(p) }, nil
	}, &created
}

func TestCollectorTail(t *testing.T) {
	tests := []struct {
		name      string
		limit     int
		writes    []string
		text      string
		truncated bool
	}{
		{"empty", 8, nil, "", false},
		{"fits", 8, []string{"abc", "def"}, "abcdef", false},
		{"exactly", 8, []string{"abcdefgh"}, "abcdefgh", false},
		{"wraps", 8, []string{"abcdef", "ghijk"}, "defghijk", true},
		{"one big write", 4, []string{"0123456789"}, "6789", true},
		{"many small", 3, strings.Split("abcdefghij", ""), "hij", true},
		{"partial rune dropped", 4, []string{"xxé€"}, "€", true}, // é€ = c3 a9 e2 82 ac
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCollector("stdout", tt.limit, 1<<20, nil)
			for _, w := range tt.writes {
				n, err := c.Write([]byte(w))
				require.NoError(t, err)
				require.Equal(t, len(w), n)
			}
			out := c.output()
			assert.Equal(t, tt.text, out.Text)
			assert.Equal(t, tt.truncated, out.Truncated)
			assert.Empty(t, out.SpillPath, "no spill function: no spill path")
		})
	}
}

func TestCollectorSpillOnFirstOverflow(t *testing.T) {
	dir := t.TempDir()
	spill, created := spillInto(dir)
	c := newCollector("stdout", 10, 1<<20, spill)

	c.Write([]byte("0123456789")) // exactly the tail: no spill yet
	assert.Empty(t, *created)
	assert.Empty(t, c.output().SpillPath)

	c.Write([]byte("abc")) // first overflow: everything so far goes to the file
	require.Len(t, *created, 1)
	c.Write([]byte("def"))
	c.close()

	out := c.output()
	assert.Equal(t, (*created)[0], out.SpillPath)
	assert.True(t, out.Truncated)
	assert.Equal(t, "6789abcdef", out.Text)
	b, err := os.ReadFile(out.SpillPath)
	require.NoError(t, err)
	assert.Equal(t, "0123456789abcdef", string(b), "the spill holds the whole stream")
	fi, err := os.Stat(out.SpillPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestCollectorSpillAbandonedPastCap(t *testing.T) {
	dir := t.TempDir()
	spill, created := spillInto(dir)
	c := newCollector("stderr", 4, 12, spill)
	c.Write([]byte("012345")) // spill: 6 bytes
	require.Len(t, *created, 1)
	path := (*created)[0]
	assert.Equal(t, path, c.output().SpillPath)
	c.Write([]byte("6789ab")) // 12: at the cap, kept
	assert.FileExists(t, path)
	c.Write([]byte("c")) // 13: past the cap, deleted and no longer advertised
	assert.NoFileExists(t, path)
	c.Write([]byte("defghijklmnop"))
	out := c.output()
	assert.Empty(t, out.SpillPath)
	assert.True(t, out.Truncated)
	assert.Equal(t, "mnop", out.Text)
	assert.Len(t, *created, 1, "an abandoned spill is never recreated")
}

func TestCollectorSpillPastCapAtOnce(t *testing.T) {
	spill, created := spillInto(t.TempDir())
	c := newCollector("stdout", 4, 8, spill)
	c.Write([]byte("0123456789")) // overflow and past the cap in one write
	assert.Empty(t, *created)
	assert.Empty(t, c.output().SpillPath)
	assert.Equal(t, "6789", c.output().Text)
}

func TestCollectorSpillUnavailable(t *testing.T) {
	c := newCollector("stdout", 4, 1<<20, func(string) (*os.File, func(), error) { return nil, nil, errors.New("disk full") })
	c.Write([]byte("0123456789"))
	out := c.output()
	assert.True(t, out.Truncated)
	assert.Empty(t, out.SpillPath)
	assert.Equal(t, "6789", out.Text)
}

func TestCollectorConsume(t *testing.T) {
	spill, _ := spillInto(t.TempDir())
	c := newCollector("stdout", 8, 1<<20, spill)

	text, lossy, _ := c.consume()
	assert.Equal(t, "", text)
	assert.False(t, lossy)

	c.Write([]byte("abc"))
	c.Write([]byte("de"))
	text, lossy, path := c.consume()
	assert.Equal(t, "abcde", text)
	assert.False(t, lossy)
	assert.Empty(t, path)

	c.Write([]byte("fgh"))
	text, lossy, _ = c.consume()
	assert.Equal(t, "fgh", text, "only what was written since the previous read")
	assert.False(t, lossy)

	c.Write([]byte("0123456789")) // 10 unread bytes, 8 kept
	text, lossy, path = c.consume()
	assert.Equal(t, "23456789", text)
	assert.True(t, lossy)
	assert.NotEmpty(t, path, "a lossy read points at the spill")

	text, lossy, _ = c.consume()
	assert.Equal(t, "", text)
	assert.False(t, lossy)
	// Consuming does not change what the final result reports.
	assert.Equal(t, "23456789", c.output().Text)
}

func TestCollectorLargeStreamIdenticalSpill(t *testing.T) {
	spill, created := spillInto(t.TempDir())
	c := newCollector("stdout", 1000, 1<<30, spill)
	var want bytes.Buffer
	chunk := make([]byte, 4093)
	for i := 0; i < 300; i++ {
		for k := range chunk {
			chunk[k] = byte(i*7 + k)
		}
		want.Write(chunk)
		c.Write(chunk)
	}
	c.close()
	require.Len(t, *created, 1)
	got, err := os.ReadFile((*created)[0])
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want.Bytes(), got), "spill differs from the stream")
	tail := want.Bytes()[want.Len()-1000:]
	assert.Equal(t, string(trimPartialRune(tail)), c.output().Text)
}
