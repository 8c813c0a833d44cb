//go:build !linux

package transaction

import "io"

// Create reports that transactions need Linux's overlayfs.
func Create(dir, workspace string) (*Tx, error) { return nil, ErrUnsupported }

// Open reports that transactions need Linux's overlayfs.
func Open(dir string) (*Tx, error) { return nil, ErrUnsupported }

// OpenOrCreate reports that transactions need Linux's overlayfs.
func OpenOrCreate(dir, workspace string) (*Tx, error) { return nil, ErrUnsupported }

// Changes reports that transactions need Linux's overlayfs.
func (t *Tx) Changes() ([]Change, error) { return nil, ErrUnsupported }

// Diff reports that transactions need Linux's overlayfs.
func (t *Tx) Diff(w io.Writer, opt DiffOptions) error { return ErrUnsupported }

// Commit reports that transactions need Linux's overlayfs.
func (t *Tx) Commit() (CommitResult, error) { return CommitResult{}, ErrUnsupported }

// Discard reports that transactions need Linux's overlayfs.
func (t *Tx) Discard() error { return ErrUnsupported }

// Hold reports that transactions need Linux's overlayfs.
func (t *Tx) Hold() (*Hold, error) { return nil, ErrUnsupported }
