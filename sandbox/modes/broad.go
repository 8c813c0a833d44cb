package modes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrBroadWorkspace is wrapped by Derive when a directory that would become
// writable under workspace-write is the root directory, a home directory or
// an ancestor of one: writable, it would hand the command everything, or
// every dotfile (~/.bashrc, ~/.ssh, ~/.gitconfig) that later runs unconfined.
// Options.AllowBroadWorkspace lifts it for the workspace and the AllowWrite
// roots; a broad TempDir is always refused.
var ErrBroadWorkspace = errors.New("writable directory too broad")

// Kinds of directory a BroadWorkspaceError names.
const (
	BroadWorkspace    = "workspace"
	BroadWritableRoot = "writable root"
	BroadTempDir      = "TMPDIR"
)

// BroadWorkspaceError names the directory Derive refused as too broad. It
// wraps ErrBroadWorkspace.
type BroadWorkspaceError struct {
	// Kind is BroadWorkspace, BroadWritableRoot or BroadTempDir.
	Kind string
	// Path is the canonical directory.
	Path string
	// Reason says why it is too broad, e.g. "it is the root directory".
	Reason string
}

func (e *BroadWorkspaceError) Error() string {
	return fmt.Sprintf("refusing to make %s %s writable: %s", e.Kind, e.Path, e.Reason)
}

func (e *BroadWorkspaceError) Unwrap() error { return ErrBroadWorkspace }

// Overridable reports whether Options.AllowBroadWorkspace lifts the refusal
// (everything but a broad TempDir).
func (e *BroadWorkspaceError) Overridable() bool { return e.Kind != BroadTempDir }

// homeDirs lists the canonical home directories no writable root may
// contain: extra (the caller's, e.g. the command's $HOME), this process's
// $HOME, the passwd home of the real uid, and /root for uid 0.
func homeDirs(r *resolver, extra []string) []string {
	cands := append([]string(nil), extra...)
	cands = append(cands, os.Getenv("HOME"))
	if h := r.passwdHome(); h != "" {
		cands = append(cands, h)
	}
	if os.Getuid() == 0 {
		cands = append(cands, "/root")
	}
	var out []string
	for _, h := range cands {
		if h == "" || !filepath.IsAbs(h) {
			continue
		}
		out = append(out, r.canonical(h))
	}
	return dedupe(out)
}

// broadReason says why the canonical directory dir is too broad to be
// writable, or "" when it is not.
func broadReason(dir string, homes []string) string {
	if dir == "/" {
		return "it is the root directory"
	}
	for _, h := range homes {
		switch {
		case h == dir:
			return "it is the home directory"
		case Within(h, dir):
			return "it contains the home directory " + h
		}
	}
	return ""
}

// checkBroad returns a *BroadWorkspaceError when dir is too broad.
func checkBroad(kind, dir string, homes []string) error {
	if r := broadReason(dir, homes); r != "" {
		return &BroadWorkspaceError{Kind: kind, Path: dir, Reason: r}
	}
	return nil
}
