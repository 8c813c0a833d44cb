package transaction

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// diffCases are inputs whose hunks are compared with GNU diff -u.
var diffCases = []struct{ name, old, new string }{
	{"one line changed", "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n", "a\nb\nc\nd\nE\nf\ng\nh\ni\nj\n"},
	{"two distant changes", lines(1, 30), strings.Replace(strings.Replace(lines(1, 30), "line 3\n", "line three\n", 1), "line 25\n", "", 1)},
	{"changes six lines apart merge", lines(1, 20), strings.Replace(strings.Replace(lines(1, 20), "line 5\n", "five\n", 1), "line 12\n", "twelve\n", 1)},
	{"changes seven lines apart split", lines(1, 20), strings.Replace(strings.Replace(lines(1, 20), "line 5\n", "five\n", 1), "line 13\n", "thirteen\n", 1)},
	{"insert at start", "a\nb\nc\nd\ne\n", "new\na\nb\nc\nd\ne\n"},
	{"append at end", "a\nb\nc\nd\ne\n", "a\nb\nc\nd\ne\nf\ng\n"},
	{"delete everything", "a\nb\n", ""},
	{"from empty", "", "a\nb\n"},
	{"no newline at end", "a\nb\nc", "a\nb\nc\n"},
	{"no newline on both", "a\nb\nc", "a\nB\nc"},
	{"single line", "x\n", "y\n"},
	{"interleaved", "a\nb\nc\nd\ne\nf\ng\n", "a\nc\nX\nd\nf\nY\ng\nZ\n"},
}

func lines(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func unified(t *testing.T, old, new string) string {
	t.Helper()
	var out bytes.Buffer
	lw := &limitedWriter{w: &out, max: 1 << 30}
	if err := writeUnified(lw, "a/f", "b/f", splitLines([]byte(old)), splitLines([]byte(new))); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// hunks drops the ---/+++ headers, which name files and times.
func hunks(diff string) string {
	var keep []string
	for _, l := range strings.SplitAfter(diff, "\n") {
		if strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "+++ ") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "")
}

func TestUnifiedMatchesGNUDiff(t *testing.T) {
	diffBin, err := exec.LookPath("diff")
	if err != nil {
		t.Skip("diff is not installed")
	}
	dir := t.TempDir()
	for _, tc := range diffCases {
		t.Run(tc.name, func(t *testing.T) {
			oldPath, newPath := filepath.Join(dir, "old"), filepath.Join(dir, "new")
			if err := os.WriteFile(oldPath, []byte(tc.old), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(newPath, []byte(tc.new), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _ := exec.Command(diffBin, "-u", oldPath, newPath).Output() // exit 1: differences
			want := hunks(string(out))
			got := hunks(unified(t, tc.old, tc.new))
			if got != want {
				t.Errorf("hunks:\n%s\nGNU diff:\n%s", got, want)
			}
		})
	}
}

// TestDiffLinesIsMinimal checks on random inputs that the edit script
// turns a into b and is as short as a plain LCS dynamic program says.
func TestDiffLinesIsMinimal(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for range 500 {
		a, b := randomLines(rng), randomLines(rng)
		script := diffLines(a, b)
		var rebuilt []string
		i, j, edits := 0, 0, 0
		for _, op := range script {
			switch op {
			case opEqual:
				if a[i] != b[j] {
					t.Fatalf("equal op on different lines %q %q", a[i], b[j])
				}
				rebuilt = append(rebuilt, a[i])
				i, j = i+1, j+1
			case opDelete:
				i++
				edits++
			case opInsert:
				rebuilt = append(rebuilt, b[j])
				j++
				edits++
			}
		}
		if i != len(a) || j != len(b) || strings.Join(rebuilt, "") != strings.Join(b, "") {
			t.Fatalf("script does not turn %q into %q", a, b)
		}
		if want := len(a) + len(b) - 2*lcsLength(a, b); edits != want {
			t.Fatalf("%d edits for %q -> %q, minimum %d", edits, a, b, want)
		}
	}
}

func randomLines(rng *rand.Rand) []string {
	n := rng.Intn(12)
	out := make([]string, n)
	for i := range out {
		out[i] = string(rune('a'+rng.Intn(4))) + "\n"
	}
	return out
}

func lcsLength(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

// TestDiffLinesBounded checks that inputs past maxEditDistance still give
// a correct (if not minimal) diff, quickly.
func TestDiffLinesBounded(t *testing.T) {
	var a, b []string
	for i := range 3 * maxEditDistance {
		a = append(a, fmt.Sprintf("a%d\n", i))
		b = append(b, fmt.Sprintf("b%d\n", i))
	}
	script := diffLines(a, b)
	if len(script) != len(a)+len(b) {
		t.Errorf("script length %d", len(script))
	}
}
