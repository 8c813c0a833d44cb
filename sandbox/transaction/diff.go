package transaction

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/internal/printable"
)

// diffContext is how many unchanged lines surround each change in a hunk,
// as with diff -u.
const diffContext = 3

// binarySniffBytes is how much of a file is searched for a NUL byte to
// call it binary, as git does.
const binarySniffBytes = 8000

// maxEditDistance bounds the Myers search: the trace it keeps grows with
// the square of the edit distance, so past this many differing lines the
// remaining middle part is shown as wholly deleted and re-inserted — still
// a correct diff, only a longer one.
const maxEditDistance = 2000

func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), binarySniffBytes)], 0) >= 0
}

// splitLines cuts data after each newline; the last line lacks one when
// the file does not end with a newline.
func splitLines(data []byte) []string {
	var lines []string
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			lines = append(lines, string(data))
			break
		}
		lines = append(lines, string(data[:i+1]))
		data = data[i+1:]
	}
	return lines
}

// editOp is one step of an edit script turning a into b.
type editOp byte

const (
	opEqual editOp = iota
	opDelete
	opInsert
)

// diffLines returns an edit script from a to b with (up to the
// maxEditDistance bound) the fewest deletions and insertions.
func diffLines(a, b []string) []editOp {
	prefix := 0
	for prefix < len(a) && prefix < len(b) && a[prefix] == b[prefix] {
		prefix++
	}
	suffix := 0
	for suffix < len(a)-prefix && suffix < len(b)-prefix && a[len(a)-1-suffix] == b[len(b)-1-suffix] {
		suffix++
	}
	script := make([]editOp, 0, len(a)+len(b))
	for range prefix {
		script = append(script, opEqual)
	}
	script = append(script, myers(a[prefix:len(a)-suffix], b[prefix:len(b)-suffix])...)
	for range suffix {
		script = append(script, opEqual)
	}
	return script
}

// myers is the O(ND) algorithm of Eugene Myers (1986): it keeps, for each
// edit distance d, the furthest x reached on every diagonal k = x-y, then
// walks the kept rows back to recover the path.
func myers(a, b []string) []editOp {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return replaceAll(n, m)
	}
	maxD := min(n+m, maxEditDistance)
	// trace[d][k+d] is the furthest x on diagonal k after d edits.
	var trace [][]int32
	var prev []int32 // the row for d-1
	found := -1
	for d := 0; d <= maxD; d++ {
		row := make([]int32, 2*d+1)
		for k := -d; k <= d; k += 2 {
			var x int
			switch {
			case d == 0:
				x = 0
			case k == -d || (k != d && prev[k-1+(d-1)] < prev[k+1+(d-1)]):
				x = int(prev[k+1+(d-1)]) // move down: insert b[y]
			default:
				x = int(prev[k-1+(d-1)]) + 1 // move right: delete a[x]
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			row[k+d] = int32(x)
			// Paths that leave the grid never come back, so reaching
			// exactly (n, m) is the end of a valid path.
			if x == n && y == m {
				found = d
			}
		}
		trace = append(trace, row)
		prev = row
		if found >= 0 {
			break
		}
	}
	if found < 0 {
		return replaceAll(n, m)
	}

	// Walk back from (n, m), collecting the script in reverse.
	rev := make([]editOp, 0, n+m)
	x, y := n, m
	for d := found; d > 0; d-- {
		k := x - y
		row := trace[d-1]
		var prevK int
		if k == -d || (k != d && row[k-1+(d-1)] < row[k+1+(d-1)]) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := int(row[prevK+(d-1)])
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			rev = append(rev, opEqual)
			x--
			y--
		}
		if prevK == k+1 {
			rev = append(rev, opInsert)
		} else {
			rev = append(rev, opDelete)
		}
		x, y = prevX, prevY
	}
	for x > 0 && y > 0 {
		rev = append(rev, opEqual)
		x--
		y--
	}
	script := make([]editOp, len(rev))
	for i, op := range rev {
		script[len(rev)-1-i] = op
	}
	return script
}

func replaceAll(n, m int) []editOp {
	script := make([]editOp, 0, n+m)
	for range n {
		script = append(script, opDelete)
	}
	for range m {
		script = append(script, opInsert)
	}
	return script
}

// changeBlock is a run of deletions and insertions between equal lines:
// a[a0:a1] is replaced by b[b0:b1].
type changeBlock struct{ a0, a1, b0, b1 int }

func changeBlocks(script []editOp) []changeBlock {
	var blocks []changeBlock
	i, j := 0, 0
	for p := 0; p < len(script); {
		if script[p] == opEqual {
			i++
			j++
			p++
			continue
		}
		blk := changeBlock{a0: i, b0: j}
		for ; p < len(script) && script[p] != opEqual; p++ {
			if script[p] == opDelete {
				i++
			} else {
				j++
			}
		}
		blk.a1, blk.b1 = i, j
		blocks = append(blocks, blk)
	}
	return blocks
}

// writeUnified writes the headers and hunks of a unified diff, grouping
// changes whose contexts touch or overlap into one hunk as GNU diff does.
func writeUnified(out *limitedWriter, oldName, newName string, a, b []string) error {
	blocks := changeBlocks(diffLines(a, b))
	if len(blocks) == 0 && oldName != "/dev/null" && newName != "/dev/null" {
		return nil // identical content (for example only the mtime changed)
	}
	if err := out.line("--- " + oldName + "\n+++ " + newName + "\n"); err != nil {
		return err
	}
	for start := 0; start < len(blocks); {
		end := start + 1
		for end < len(blocks) && blocks[end].a0-blocks[end-1].a1 <= 2*diffContext {
			end++
		}
		first, last := blocks[start], blocks[end-1]
		lead := min(diffContext, first.a0)
		a0, b0 := first.a0-lead, first.b0-lead
		trail := min(diffContext, len(a)-last.a1)
		a1, b1 := last.a1+trail, last.b1+trail
		var h strings.Builder
		h.WriteString("@@ -" + hunkRange(a0, a1-a0) + " +" + hunkRange(b0, b1-b0) + " @@\n")
		i, j := a0, b0
		for _, blk := range blocks[start:end] {
			for ; i < blk.a0; i, j = i+1, j+1 {
				writeHunkLine(&h, ' ', a[i])
			}
			for ; i < blk.a1; i++ {
				writeHunkLine(&h, '-', a[i])
			}
			for ; j < blk.b1; j++ {
				writeHunkLine(&h, '+', b[j])
			}
		}
		for ; i < a1; i, j = i+1, j+1 {
			writeHunkLine(&h, ' ', a[i])
		}
		if err := out.line(h.String()); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// hunkRange formats one side of a hunk header like GNU diff: "l,s", just
// "l" when s is 1, and the line before the hunk when it is empty.
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	default:
		return fmt.Sprintf("%d,%d", start+1, count)
	}
}

// writeHunkLine writes one line of a hunk, its control characters
// escaped: a line the command wrote must not move the cursor over the
// lines a reviewer reads, nor fake a header.
func writeHunkLine(b *strings.Builder, prefix byte, line string) {
	b.WriteByte(prefix)
	b.WriteString(printable.Text(line))
	if !strings.HasSuffix(line, "\n") {
		b.WriteString("\n\\ No newline at end of file\n")
	}
}

// errTruncated stops Diff once the output reached its bound.
var errTruncated = errors.New("diff truncated")

// limitedWriter writes whole pieces (lines, hunks) while they fit in max
// bytes in total, so a truncated diff never ends in half a line.
type limitedWriter struct {
	w       io.Writer
	written int64
	max     int64
}

func (l *limitedWriter) line(s string) error {
	if l.written+int64(len(s)) > l.max {
		// A hunk that does not fit as a whole is cut at a line boundary.
		for _, piece := range strings.SplitAfter(s, "\n") {
			if piece == "" || l.written+int64(len(piece)) > l.max {
				break
			}
			if _, err := io.WriteString(l.w, piece); err != nil {
				return fmt.Errorf("write diff: %w", err)
			}
			l.written += int64(len(piece))
		}
		return errTruncated
	}
	if _, err := io.WriteString(l.w, s); err != nil {
		return fmt.Errorf("write diff: %w", err)
	}
	l.written += int64(len(s))
	return nil
}

func (l *limitedWriter) finishTruncated() error {
	if _, err := io.WriteString(l.w, "... diff truncated\n"); err != nil {
		return fmt.Errorf("write diff: %w", err)
	}
	return nil
}
