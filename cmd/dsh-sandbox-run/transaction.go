package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dsh-sandbox/dsh-sandbox/internal/printable"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/transaction"
)

// exitRefused is a subcommand's status when it refused on what it found:
// commit's when the workspace changed where the transaction did, and every
// subcommand's when the transaction was changed outside its commands.
// Nothing was applied.
const exitRefused = 1

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
	refuse := func(err error) int {
		what := argv[0]
		if what == "commit" {
			what = "commit refused, nothing applied"
		}
		if errors.Is(err, transaction.ErrTampered) {
			fmt.Fprintf(stderr, "%s: %s: %s (remove %s to drop it)\n", name, what, printable.Name(err.Error()), printable.Name(dir))
		} else {
			fmt.Fprintf(stderr, "%s: %s: %s\n", name, what, printable.Name(err.Error()))
		}
		return exitRefused
	}
	tx, err := transaction.Open(dir)
	if errors.Is(err, transaction.ErrTampered) {
		return refuse(err)
	}
	if err != nil {
		return fail("%s", printable.Name(err.Error()))
	}
	switch argv[0] {
	case "commit":
		res, err := tx.Commit()
		var ce *transaction.ConflictError
		if errors.As(err, &ce) || errors.Is(err, transaction.ErrTampered) {
			return refuse(err)
		}
		if err != nil {
			return fail("commit: %s", printable.Name(err.Error()))
		}
		fmt.Fprintf(stdout, "committed %s to %s: %d applied, %d removed\n", printable.Name(dir), printable.Name(tx.Workspace()), res.Applied, res.Removed)
		for _, s := range res.Skipped {
			fmt.Fprintf(stderr, "%s: not applied (no such file type can be made here): %s\n", name, printable.Name(s))
		}
		for _, s := range res.Stripped {
			fmt.Fprintf(stderr, "%s: applied without its set-user-ID, set-group-ID or capability bits: %s\n", name, printable.Name(s))
		}
	case "discard":
		if err := tx.Discard(); err != nil {
			return fail("discard: %s", printable.Name(err.Error()))
		}
		fmt.Fprintf(stdout, "discarded %s (%s untouched)\n", printable.Name(dir), printable.Name(tx.Workspace()))
	case "diff":
		if err := tx.Diff(stdout, transaction.DiffOptions{}); err != nil {
			if errors.Is(err, transaction.ErrTampered) {
				return refuse(err)
			}
			return fail("diff: %s", printable.Name(err.Error()))
		}
	case "changes":
		cs, err := tx.Changes()
		if errors.Is(err, transaction.ErrTampered) {
			return refuse(err)
		}
		if err != nil {
			return fail("changes: %s", printable.Name(err.Error()))
		}
		if cs == nil {
			cs = []transaction.Change{}
		}
		out, err := json.MarshalIndent(cs, "", "  ")
		if err != nil {
			return fail("changes: %v", err)
		}
		// JSON escapes C0 controls; the C1 controls and the bidirectional
		// ones it leaves raw are escaped too, so that the listing cannot
		// drive a terminal.
		if _, err := stdout.Write(append(printable.JSON(out), '\n')); err != nil {
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
