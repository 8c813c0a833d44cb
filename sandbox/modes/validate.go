package modes

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ErrInvalidPolicy is wrapped by every error Validate returns.
var ErrInvalidPolicy = errors.New("invalid policy")

// Validate checks that p is consistent, as Derive makes it, so that what
// is enforced is what a report of p says:
//
//   - the mode is one of the three; danger-full-access needs nothing else;
//   - the workspace is absolute, clean and free of symlinks;
//   - read-only has no writable roots;
//   - workspace-write has writable roots, each absolute, clean and free of
//     symlinks, and the workspace lies in one of them;
//   - every protected path is absolute and clean, and under workspace-write
//     lies in a writable root;
//   - every deny-read path is absolute and clean, neither /, nor under /proc
//     or /dev, nor the workspace, a writable root or an ancestor of one;
//     danger-full-access has none;
//   - an allowlist comes with the network off, in a confined mode, and its
//     patterns and hosts parse;
//   - caches come under workspace-write only, with a cache store outside
//     every writable root, each absolute, clean and overlapping no
//     writable root nor the store.
//
// A policy from Derive is valid (while its directories stay as they were).
func (p Policy) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidPolicy, fmt.Sprintf(format, a...))
	}
	if !p.Mode.Valid() {
		return bad("%v %d", ErrUnknownMode, int(p.Mode))
	}
	if err := p.Limits.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	if p.Allowlist != nil {
		if p.Network || !p.Mode.Confines() {
			return bad("an allowlist with the network on (%s mode)", p.Mode)
		}
		if _, err := p.Allowlist.canonical(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
		}
	}
	if p.Mode == DangerFullAccess {
		if len(p.DenyRead) > 0 {
			return bad("danger-full-access with deny-read paths %q", p.DenyRead)
		}
		return nil
	}
	if err := checkCanonical(p.Workspace); err != nil {
		return bad("workspace: %v", err)
	}
	if err := p.validCaches(); err != nil {
		return bad("%v", err)
	}
	switch p.Mode {
	case ReadOnly:
		if len(p.WritableRoots) > 0 {
			return bad("read-only mode with writable roots %q", p.WritableRoots)
		}
	case WorkspaceWrite:
		if len(p.WritableRoots) == 0 {
			return bad("workspace-write mode without writable roots")
		}
		for _, r := range p.WritableRoots {
			if err := checkCanonical(r); err != nil {
				return bad("writable root: %v", err)
			}
		}
		if !withinAny(p.Workspace, p.WritableRoots) {
			return bad("workspace %q is in no writable root", p.Workspace)
		}
	}
	for _, pp := range p.Protected {
		if err := checkClean(pp); err != nil {
			return bad("protected path: %v", err)
		}
		if p.Mode == WorkspaceWrite && !withinAny(pp, p.WritableRoots) {
			return bad("protected path %q is in no writable root", pp)
		}
	}
	if err := p.checkDenyRead(); err != nil {
		return bad("%v", err)
	}
	return nil
}

// checkClean fails unless path is absolute and clean.
func checkClean(path string) error {
	switch {
	case path == "":
		return errors.New("empty path")
	case strings.IndexByte(path, 0) >= 0:
		return fmt.Errorf("%q contains a NUL byte", path)
	case !filepath.IsAbs(path):
		return fmt.Errorf("%q is not absolute", path)
	case filepath.Clean(path) != path:
		return fmt.Errorf("%q is not clean (%q)", path, filepath.Clean(path))
	}
	return nil
}

// checkCanonical fails unless path is absolute, clean, exists and has no
// symlink in it.
func checkCanonical(path string) error {
	if err := checkClean(path); err != nil {
		return err
	}
	c, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	if c != path {
		return fmt.Errorf("%q is not canonical (it resolves to %q)", path, c)
	}
	return nil
}

// validCaches checks Caches and CacheDir (see Validate).
func (p Policy) validCaches() error {
	if len(p.Caches) == 0 {
		return nil
	}
	if p.Mode != WorkspaceWrite {
		return fmt.Errorf("caches in %s mode", p.Mode)
	}
	if err := checkClean(p.CacheDir); err != nil {
		return fmt.Errorf("cache store: %v", err)
	}
	if r := rootOf(p.WritableRoots, p.CacheDir); r != "" {
		return fmt.Errorf("cache store %q lies in the writable root %q", p.CacheDir, r)
	}
	for _, c := range p.Caches {
		if err := checkClean(c); err != nil {
			return fmt.Errorf("cache: %v", err)
		}
		for _, r := range append([]string{p.CacheDir}, p.WritableRoots...) {
			if Within(c, r) || Within(r, c) {
				return fmt.Errorf("cache %q overlaps %q", c, r)
			}
		}
	}
	return nil
}
