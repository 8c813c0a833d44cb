package printable

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Name renders s with every character that does not show as itself
// escaped, newline and tab included: for a file name or a path on one line.
// A string without any is returned as it is; otherwise it is written as Go
// writes a quoted string (\n, \x1b, \u202e, backslashes doubled), without
// the quotes.
func Name(s string) string { return render(s, false) }

// Text renders s like Name but keeps newlines and tabs: for multi-line text
// (a command shown in a prompt, a line of a diff).
func Text(s string) string { return render(s, true) }

func render(s string, keepLayout bool) string {
	if !needsEscape(s, keepLayout) {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\x`...)
			b = append(b, "0123456789abcdef"[s[i]>>4], "0123456789abcdef"[s[i]&0xf])
		case keepLayout && (r == '\n' || r == '\t'), r == '"', r == '\'':
			b = append(b, s[i:i+size]...)
		default:
			q := strconv.AppendQuoteRune(nil, r)
			b = append(b, q[1:len(q)-1]...) // without the quotes
		}
		i += size
	}
	return string(b)
}

func needsEscape(s string, keepLayout bool) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return true
		case keepLayout && (r == '\n' || r == '\t'):
		case hidden(r):
			return true
		}
		i += size
	}
	return false
}

// hidden reports a character that does not show as itself: controls (C0,
// DEL, C1: terminal escape sequences, carriage returns, the 8-bit CSI),
// format characters (the bidirectional overrides and isolates that reorder
// what is displayed, zero-width ones), separators but the space.
func hidden(r rune) bool { return !unicode.IsPrint(r) }

// JSON returns encoded JSON with the characters that do not show as
// themselves and that encoding/json leaves raw (DEL, the C1 controls, the
// bidirectional controls; it escapes the C0 ones itself) written as \uXXXX
// escapes: the same JSON value, safe to print on a terminal. Outside
// strings JSON has only ASCII punctuation and whitespace, so every such
// character is inside a string.
func JSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if hidden(r) && r != '\n' && r != '\t' && r != '\r' && size > 1 || r == 0x7f {
			out = append(out, `\u`...)
			out = append(out, []byte(leftPad(strconv.FormatInt(int64(r), 16)))...)
		} else {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

func leftPad(hex string) string {
	for len(hex) < 4 {
		hex = "0" + hex
	}
	return hex
}
