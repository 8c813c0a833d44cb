package transaction

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

const benchFiles = 5000

// writeBenchTree writes benchFiles small files in 50 directories under
// root, the way a command's new files sit in the upper layer.
func writeBenchTree(b *testing.B, root string) {
	b.Helper()
	for i := range benchFiles {
		dir := filepath.Join(root, fmt.Sprintf("d%02d", i%50))
		if i < 50 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommit5000 commits 5,000 new small files (the seal verified,
// each file copied from its upper entry). Compare it with
// BenchmarkCopyA5000, the cost of copying the same tree with cp -a, and
// BenchmarkSeal5000, what Release adds after a command that wrote them.
func BenchmarkCommit5000(b *testing.B) {
	base := b.TempDir()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ws := filepath.Join(base, fmt.Sprintf("ws%d", i))
		if err := os.Mkdir(ws, 0o755); err != nil {
			b.Fatal(err)
		}
		tx, err := Create(filepath.Join(base, fmt.Sprintf("tx%d", i)), ws)
		if err != nil {
			b.Fatal(err)
		}
		hold, err := tx.Hold()
		if err != nil {
			b.Fatal(err)
		}
		writeBenchTree(b, tx.UpperDir())
		if err := hold.Release(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := tx.Commit()
		if err != nil {
			b.Fatal(err)
		}
		if res.Applied != benchFiles+50 {
			b.Fatalf("applied %d", res.Applied)
		}
	}
}

func BenchmarkCopyA5000(b *testing.B) {
	base := b.TempDir()
	src := filepath.Join(base, "src")
	writeBenchTree(b, src)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out, err := exec.Command("cp", "-a", src, filepath.Join(base, fmt.Sprintf("dst%d", i))).CombinedOutput(); err != nil {
			b.Fatalf("cp -a: %v: %s", err, out)
		}
	}
}

// BenchmarkSeal5000 seals an upper layer of 5,000 small files: the cost
// Release adds to a transactional command that wrote them.
func BenchmarkSeal5000(b *testing.B) {
	base := b.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	tx, err := Create(filepath.Join(base, "tx"), ws)
	if err != nil {
		b.Fatal(err)
	}
	hold, err := tx.Hold()
	if err != nil {
		b.Fatal(err)
	}
	writeBenchTree(b, tx.UpperDir())
	if err := hold.Release(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		hold, err := tx.Hold()
		if err != nil {
			b.Fatal(err)
		}
		if err := hold.Release(); err != nil {
			b.Fatal(err)
		}
	}
}
