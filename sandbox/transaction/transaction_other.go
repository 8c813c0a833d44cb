//go:build !linux

package transaction

import "os"

// Create reports that transactions need Linux's overlayfs.
func Create(dir, workspace string) (*Tx, error) { return nil, ErrUnsupported }

// Open reports that transactions need Linux's overlayfs.
func Open(dir string) (*Tx, error) { return nil, ErrUnsupported }

// OpenOrCreate reports that transactions need Linux's overlayfs.
func OpenOrCreate(dir, workspace string) (*Tx, error) { return nil, ErrUnsupported }

// Changes reports that transactions need Linux's overlayfs.
func (t *Tx) Changes() ([]Change, error) { return nil, ErrUnsupported }

// Commit reports that transactions need Linux's overlayfs.
func (t *Tx) Commit() (CommitResult, error) { return CommitResult{}, ErrUnsupported }

// Discard reports that transactions need Linux's overlayfs.
func (t *Tx) Discard() error { return ErrUnsupported }

// Hold reports that transactions need Linux's overlayfs.
func (t *Tx) Hold() (*os.File, error) { return nil, ErrUnsupported }
