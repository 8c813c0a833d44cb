package transaction

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/changes"
)

// Change is one path a transaction changes in the workspace. Op is one of
// "created", "modified", "removed" or "mode"; Path is absolute (the
// workspace joined with the path relative to it).
type Change = changes.Change

// States of a transaction, as recorded in its manifest.
const (
	StateOpen       = "open"       // commands may run; nothing applied yet
	StateCommitting = "committing" // Commit started; run it again to finish
	StateCommitted  = "committed"  // applied to the workspace
	StateDiscarded  = "discarded"  // dropped; the workspace was not touched
)

// manifestVersion is the only manifest layout this package reads (2: with
// the workspace's identity and the sealed upper layer).
const manifestVersion = 2

// File and directory names inside a transaction directory.
const (
	manifestName = "transaction.json"
	markerName   = "started"
	upperName    = "upper"
	workName     = "work"
	journalName  = "journal"
)

// trashPrefix names the entries Commit moves aside in the workspace before
// deleting them, so a removal is a single rename (atomic) followed by a
// cleanup that may be finished later from the journal.
const trashPrefix = ".dsh-tx-trash-"

// ErrEnded is wrapped by the errors about a transaction that was already
// committed or discarded.
var ErrEnded = errors.New("transaction has ended")

// ErrTampered is wrapped by the errors about a transaction directory that
// was changed other than by the transaction's own commands: its document
// does not verify, or its upper layer is not what the last command left.
var ErrTampered = errors.New("transaction was changed outside its commands")

// ErrUnsupported is returned where a transaction cannot be kept: off
// Linux, or a transaction directory whose filesystem lacks what the
// overlay's upper layer needs.
var ErrUnsupported = errors.New("transactions are not supported here")

// ConflictError is returned by Commit when the workspace changed, since the
// transaction started, at paths the transaction would write or remove.
// Nothing was applied.
type ConflictError struct {
	// Paths are the absolute workspace paths in conflict, sorted.
	Paths []string
	// Reasons holds why each path conflicts, by path.
	Reasons map[string]string
}

// maxConflictsInMessage bounds the paths Error lists.
const maxConflictsInMessage = 10

func (e *ConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "transaction conflicts with %d path(s) changed in the workspace since it started; nothing was applied:", len(e.Paths))
	for i, p := range e.Paths {
		if i == maxConflictsInMessage {
			fmt.Fprintf(&b, " ... and %d more", len(e.Paths)-maxConflictsInMessage)
			break
		}
		if reason := e.Reasons[p]; reason != "" {
			fmt.Fprintf(&b, " %s (%s);", p, reason)
		} else {
			fmt.Fprintf(&b, " %s;", p)
		}
	}
	return strings.TrimSuffix(b.String(), ";")
}

// CommitResult says what Commit did.
type CommitResult struct {
	// Applied counts the entries written to the workspace: files,
	// symlinks, FIFOs and directories created or changed.
	Applied int
	// Removed counts the workspace paths removed (a removed directory
	// counts once).
	Removed int
	// Skipped lists, relative to the workspace, the device nodes and
	// sockets the command created: they are not applied.
	Skipped []string
	// Stripped lists, relative to the workspace, the files applied without
	// the set-user-ID or set-group-ID bit or the file capabilities the
	// command gave them: a workspace must not receive an executable that
	// runs with its owner's or elevated privileges for whoever starts it.
	Stripped []string
}

// DiffOptions bounds the output of Diff.
type DiffOptions struct {
	// MaxFileBytes is the largest file that is diffed; a larger one gets
	// a one-line note. 0 means 1 MiB.
	MaxFileBytes int64
	// MaxBytes bounds the whole diff; past it the output ends with
	// "... diff truncated". 0 means 4 MiB.
	MaxBytes int64
}

const (
	defaultMaxFileBytes = 1 << 20
	defaultMaxBytes     = 4 << 20
)

// Tx is an opened transaction directory. Its methods are not safe for
// concurrent use by several goroutines; Commit and Discard lock the
// directory so that two processes cannot apply or drop it at once.
type Tx struct {
	dir            string
	workspace      string
	wsDev, wsIno   uint64
	started        time.Time
	startedCtimeNs int64
	state          string

	// stopAfterEntries, when positive, makes Commit fail after applying
	// that many upper-layer entries: tests use it to simulate an
	// interrupted commit.
	stopAfterEntries int
}

// A Hold keeps a transaction in use by one command (see Tx.Hold): its
// descriptors go to the sandbox's runner, and Release seals the upper
// layer as the command left it.
type Hold struct {
	files   []*os.File
	release func(seal bool) error
}

// Files returns the descriptors the sandbox hands its runner, in this
// order: the transaction directory (whose shared lock lasts while any of
// the runner's processes lives), the upper layer and the work directory
// (which the runner mounts through /proc/self/fd, never by path).
func (h *Hold) Files() []*os.File { return h.files }

// Release ends the hold once every process of the command is gone,
// sealing the upper layer as the command left it.
func (h *Hold) Release() error { return h.release(true) }

// Close ends the hold without sealing: for a command that never ran.
func (h *Hold) Close() error { return h.release(false) }

// Dir is the transaction directory (canonical absolute path).
func (t *Tx) Dir() string { return t.dir }

// Workspace is the directory the transaction applies to (canonical
// absolute path).
func (t *Tx) Workspace() string { return t.workspace }

// UpperDir is the overlay upper directory: mount it with
// upperdir=UpperDir(), workdir=WorkDir(), lowerdir=Workspace().
func (t *Tx) UpperDir() string { return filepath.Join(t.dir, upperName) }

// WorkDir is the overlay work directory.
func (t *Tx) WorkDir() string { return filepath.Join(t.dir, workName) }

// Started is when the transaction was created, on the kernel's file
// timestamp clock.
func (t *Tx) Started() time.Time { return t.started }

// State is the state the transaction was in when opened, or after the
// last Commit or Discard through this Tx.
func (t *Tx) State() string { return t.state }

// checkUsable returns an error wrapping ErrEnded once the transaction was
// committed or discarded.
func (t *Tx) checkUsable() error {
	switch t.state {
	case StateOpen, StateCommitting:
		return nil
	default:
		return fmt.Errorf("%w: transaction %s is already %s", ErrEnded, t.dir, t.state)
	}
}
