//go:build !unix

package policyfile

import (
	"errors"
	"os"
)

// openNoFollow refuses: without openat and O_NOFOLLOW no project file is
// read (none applies).
func openNoFollow(dir, name string) (*os.File, error) {
	return nil, errors.New("project policy files need a Unix system")
}
