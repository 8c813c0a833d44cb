package transaction_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/transaction"
)

// A transaction is created for a workspace; for each command the sandbox
// holds it, its runner mounts an overlay whose upper layer is
// tx.UpperDir(), and the hold's Release seals what the command left. Here
// a file written straight into the upper layer while the transaction is
// held stands for a command's write.
func Example() {
	base, err := os.MkdirTemp("", "tx-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(base)
	workspace := filepath.Join(base, "workspace")
	if err := os.Mkdir(workspace, 0o755); err != nil {
		fmt.Println(err)
		return
	}

	tx, err := transaction.Create(filepath.Join(base, "tx"), workspace)
	if err != nil {
		fmt.Println(err)
		return
	}
	hold, err := tx.Hold()
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := os.WriteFile(filepath.Join(tx.UpperDir(), "notes.txt"), []byte("hello\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	if err := hold.Release(); err != nil {
		fmt.Println(err)
		return
	}

	changes, err := tx.Changes()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range changes {
		rel, _ := filepath.Rel(tx.Workspace(), c.Path)
		fmt.Println(c.Op, rel, c.Type, c.Size, c.Mode)
	}
	if err := tx.Diff(os.Stdout, transaction.DiffOptions{}); err != nil {
		fmt.Println(err)
		return
	}

	if err := tx.Discard(); err != nil {
		fmt.Println(err)
		return
	}
	_, statErr := os.Stat(filepath.Join(workspace, "notes.txt"))
	fmt.Println("state:", tx.State(), "- in workspace:", !os.IsNotExist(statErr))
	// Output:
	// created notes.txt file 6 0644
	// --- /dev/null
	// +++ b/notes.txt
	// @@ -0,0 +1 @@
	// +hello
	// state: discarded - in workspace: false
}
