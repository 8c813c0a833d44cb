package executor

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Characters of every UTF-8 width.
const mixedText = "aé€😀b𝄞ñ中😀z"

func TestTrimPartialRune(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"ascii", "abc", "abc"},
		{"starts on a 2-byte char", "é!", "é!"},
		{"1 byte of a 2-byte char left", "\xa9x", "x"},
		{"2 bytes of a 3-byte char left", "\x82\xacx", "x"},
		{"1 byte of a 3-byte char left", "\xacx", "x"},
		{"3 bytes of a 4-byte char left", "\x9f\x98\x80x", "x"},
		{"2 bytes of a 4-byte char left", "\x98\x80😀", "😀"},
		{"1 byte of a 4-byte char left", "\x80é", "é"},
		{"only the cut char left", "\x9f\x98\x80", ""},
		{"not UTF-8 at all: kept", "\x80\x80\x80\x80x", "\x80\x80\x80\x80x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, string(trimPartialRune([]byte(tt.in))))
		})
	}
}

func TestIncompleteSuffix(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int
	}{
		{"empty", "", 0},
		{"ascii", "ab", 0},
		{"complete 4-byte char", "a😀", 0},
		{"1 of 2 bytes", "a\xc3", 1},
		{"1 of 3 bytes", "a\xe2", 1},
		{"2 of 3 bytes", "a\xe2\x82", 2},
		{"1 of 4 bytes", "a\xf0", 1},
		{"2 of 4 bytes", "a\xf0\x9f", 2},
		{"3 of 4 bytes", "a\xf0\x9f\x98", 3},
		{"only a cut char", "\xf0\x9f\x98", 3},
		{"invalid lead byte: not held", "a\xff", 0},
		{"invalid continuation: not held", "a\xe2x", 0},
		{"stray continuation: not held", "a\x80", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, incompleteSuffix([]byte(tt.in)))
		})
	}
}

// A truncated tail starts on a character boundary whatever the limit cuts.
func TestCollectorTailStartsOnCharacter(t *testing.T) {
	stream := "x" + strings.Repeat(mixedText, 50)
	for limit := 1; limit <= 40; limit++ {
		c := newCollector("stdout", limit, 1<<20, nil)
		c.Write([]byte(stream))
		c.close()
		out := c.output()
		require.True(t, out.Truncated)
		assert.True(t, utf8.ValidString(out.Text), "limit %d: tail %q is not valid UTF-8", limit, out.Text)
		assert.True(t, strings.HasSuffix(stream, out.Text), "limit %d: tail %q is not the end of the stream", limit, out.Text)
		assert.GreaterOrEqual(t, len(out.Text), limit-(utf8.UTFMax-1), "limit %d: more than a partial character dropped", limit)
	}
	// x then 30000 emoji, a tail that cuts one: not 9f 98 80 first.
	c := newCollector("stdout", DefaultTailBytes+3, 1<<30, nil)
	c.Write([]byte("x" + strings.Repeat("😀", 30000)))
	assert.True(t, strings.HasPrefix(c.output().Text, "😀"), "tail starts % x", c.output().Text[:4])
}

// Consuming reads never split a character: every delta is valid UTF-8, and
// together they are the stream, whatever the write boundaries; an
// incomplete character at the end is given once the stream ended.
func TestCollectorConsumeKeepsCharacters(t *testing.T) {
	stream := strings.Repeat(mixedText, 3)
	for _, tt := range []struct {
		name  string
		chunk int
		tail  string // appended after the last read: an incomplete char
	}{
		{"byte by byte", 1, ""},
		{"2 bytes", 2, ""},
		{"3 bytes", 3, ""},
		{"5 bytes", 5, ""},
		{"7 bytes", 7, ""},
		{"cut char at the end", 3, "\xf0\x9f\x98"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCollector("stdout", 1<<10, 1<<20, nil)
			var got strings.Builder
			read := func() {
				text, lossy, _ := c.consume()
				require.False(t, lossy)
				require.True(t, utf8.ValidString(text), "delta %q splits a character", text)
				got.WriteString(text)
			}
			b := []byte(stream)
			for len(b) > 0 {
				n := min(tt.chunk, len(b))
				c.Write(b[:n])
				b = b[n:]
				read()
			}
			assert.Equal(t, stream, got.String())
			c.Write([]byte(tt.tail))
			read()
			assert.Equal(t, stream, got.String(), "an incomplete character is held while the stream lives")
			c.close()
			text, _, _ := c.consume()
			assert.Equal(t, tt.tail, text, "the stream ended: what is there is given")
			assert.Equal(t, stream+tt.tail, c.output().Text)
		})
	}
}

// A lossy read (the unread bytes outgrew the tail) starts on a character,
// and ends on one while the stream lives.
func TestCollectorLossyConsumeKeepsCharacters(t *testing.T) {
	for limit := 4; limit <= 24; limit++ {
		c := newCollector("stdout", limit, 1<<20, nil)
		c.Write([]byte("x" + strings.Repeat(mixedText, 10) + "\xe2\x82"))
		text, lossy, _ := c.consume()
		assert.True(t, lossy)
		assert.True(t, utf8.ValidString(text), "limit %d: lossy delta %q is not valid UTF-8", limit, text)
		c.Write([]byte("\xac"))
		text, lossy, _ = c.consume()
		assert.False(t, lossy, "limit %d", limit)
		assert.Equal(t, "€", text, "limit %d: the held-back character completes in the next read", limit)
	}
}
