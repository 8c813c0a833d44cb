package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/transaction"
)

// exitConflict is commit's status when the workspace changed where the
// transaction did: nothing was applied.
const exitConflict = 1

// transactionCommands are the subcommands on a transaction's directory.
var transactionCommands = []string{"commit", "discard", "diff", "changes"}

func isTransactionCommand(arg string) bool {
	for _, c := range transactionCommands {
		if arg == c {
			return true
		}
	}
	return false
}

// transactionCommand runs `commit|discard|diff|changes DIR`.
func transactionCommand(argv []string, stdout, stderr io.Writer) int {
	fail := failer(stderr, name, exitSetup)
	if len(argv) != 2 || argv[1] == "" {
		return fail("usage error: %s takes one argument, the transaction's directory (%s %s DIR)", argv[0], name, argv[0])
	}
	dir, err := filepath.Abs(argv[1])
	if err != nil {
		return fail("%s: %v", argv[1], err)
	}
	tx, err := transaction.Open(dir)
	if err != nil {
		return fail("%v", err)
	}
	switch argv[0] {
	case "commit":
		res, err := tx.Commit()
		var ce *transaction.ConflictError
		if errors.As(err, &ce) {
			fmt.Fprintf(stderr, "%s: commit refused, nothing applied: %v\n", name, err)
			return exitConflict
		}
		if err != nil {
			return fail("commit: %v", err)
		}
		fmt.Fprintf(stdout, "committed %s to %s: %d applied, %d removed\n", dir, tx.Workspace(), res.Applied, res.Removed)
		for _, s := range res.Skipped {
			fmt.Fprintf(stderr, "%s: not applied (no such file type can be made here): %s\n", name, s)
		}
	case "discard":
		if err := tx.Discard(); err != nil {
			return fail("discard: %v", err)
		}
		fmt.Fprintf(stdout, "discarded %s (%s untouched)\n", dir, tx.Workspace())
	case "diff":
		if err := tx.Diff(stdout, transaction.DiffOptions{}); err != nil {
			return fail("diff: %v", err)
		}
	case "changes":
		cs, err := tx.Changes()
		if err != nil {
			return fail("changes: %v", err)
		}
		if cs == nil {
			cs = []transaction.Change{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(cs); err != nil {
			return fail("changes: %v", err)
		}
	}
	return 0
}

// openTransaction opens the transaction in dir for workspace, or makes it
// when dir is missing or empty. unmake, when not nil, undoes the making (for
// a command that never ran): it removes dir, or what it put in dir when dir
// was there, empty, before.
func openTransaction(dir, workspace string) (tx *transaction.Tx, unmake func(), err error) {
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, nil, fmt.Errorf("--transaction: %w", err)
	}
	ents, statErr := os.ReadDir(dir)
	if tx, err = transaction.OpenOrCreate(dir, workspace); err != nil {
		return nil, nil, fmt.Errorf("--transaction: %w", err)
	}
	switch {
	case errors.Is(statErr, os.ErrNotExist):
		unmake = func() { os.RemoveAll(dir) }
	case statErr == nil && len(ents) == 0:
		unmake = func() {
			made, _ := os.ReadDir(dir)
			for _, e := range made {
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
	return tx, unmake, nil
}
