package transaction

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	m := mounters(t)[0]
	env := newTestEnv(t, m)
	env.writeFiles(t, map[string]string{
		"text.txt":    lines(1, 20),
		"gone.txt":    "bye\n",
		"dir/a":       "a\n",
		"bin.dat":     "abc\x00def\n",
		"big.txt":     strings.Repeat("x\n", 600),
		"mode.sh":     "echo\n",
		"link":        "->text.txt",
		"no-eol.txt":  "last",
		"same-as.txt": "s\n",
	})
	tx := env.create(t)
	env.runInOverlay(t, tx, `sed -i 's/^line 10$/line ten/' text.txt
rm gone.txt
rm -rf dir
printf 'abc\000xyz\n' > bin.dat
echo y >> big.txt
chmod 755 mode.sh
rm link && ln -s gone.txt link
printf 'last\n' > no-eol.txt
printf 'one\ntwo\n' > new.txt
mkdir newdir
touch same-as.txt`)

	var out bytes.Buffer
	if err := tx.Diff(&out, DiffOptions{MaxFileBytes: 1000}); err != nil {
		t.Fatal(err)
	}
	want := `File a/big.txt too large to diff
Binary files a/bin.dat and b/bin.dat differ
Removed directory dir
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
Symlink link changed from text.txt to gone.txt
Mode of mode.sh changed from 0644 to 0755
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+one
+two
New directory newdir
--- a/no-eol.txt
+++ b/no-eol.txt
@@ -1 +1 @@
-last
\ No newline at end of file
+last
--- a/text.txt
+++ b/text.txt
@@ -7,7 +7,7 @@
 line 7
 line 8
 line 9
-line 10
+line ten
 line 11
 line 12
 line 13
`
	if out.String() != want {
		t.Errorf("diff:\n%s\nwant:\n%s", out.String(), want)
	}

	// Truncation cuts at a line and says so.
	for _, limit := range []int64{10, 120, 300} {
		var small bytes.Buffer
		if err := tx.Diff(&small, DiffOptions{MaxFileBytes: 1000, MaxBytes: limit}); err != nil {
			t.Fatal(err)
		}
		s := small.String()
		body := strings.TrimSuffix(s, "... diff truncated\n")
		if body == s || int64(len(body)) > limit || !strings.HasPrefix(want, body) {
			t.Errorf("MaxBytes %d: %q", limit, s)
		}
	}

	// Nothing was changed by diffing.
	if _, err := os.Lstat(tx.UpperDir() + "/new.txt"); err != nil {
		t.Error(err)
	}
}
