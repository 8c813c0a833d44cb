//go:build !unix

package credfiles

import "errors"

// Read refuses: without O_NOFOLLOW no credential file is copied (each is
// hidden whole).
func Read(p string) ([]byte, error) {
	return nil, errors.New("credential files are copied on Unix systems only")
}
