package policyfile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ProjectFile is the name of a workspace's policy file.
const ProjectFile = ".dsh-sandbox.toml"

// maxFile bounds a policy file's size.
const maxFile = 1 << 20

// Dirs returns the user's dsh-sandbox directories from the environment:
// config, which holds config.toml ($XDG_CONFIG_HOME/dsh-sandbox, else
// $HOME/.config/dsh-sandbox), and state, which holds the trust records
// ($XDG_STATE_HOME/dsh-sandbox, else $HOME/.local/state/dsh-sandbox). A
// relative XDG variable is ignored, as the XDG spec asks. Both are ""
// without a home.
func Dirs(getenv func(string) string) (config, state string) {
	dir := func(xdg, fallback string) string {
		if v := getenv(xdg); filepath.IsAbs(v) {
			return filepath.Join(v, "dsh-sandbox")
		}
		if home := getenv("HOME"); filepath.IsAbs(home) {
			return filepath.Join(home, fallback, "dsh-sandbox")
		}
		return ""
	}
	return dir("XDG_CONFIG_HOME", ".config"), dir("XDG_STATE_HOME", filepath.Join(".local", "state"))
}

// ReadProject reads dir's ProjectFile through a descriptor: never through
// a symlink, only a regular file, at most 1 MiB. It returns the bytes and
// the file's path (dir made absolute, symlinks in it resolved);
// os.ErrNotExist when there is none.
func ReadProject(dir string) ([]byte, string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, "", err
	}
	if real, err = filepath.Abs(real); err != nil {
		return nil, "", err
	}
	path := filepath.Join(real, ProjectFile)
	f, err := openNoFollow(real, ProjectFile)
	if err != nil {
		return nil, path, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, path, err
	} else if !fi.Mode().IsRegular() {
		return nil, path, errors.New("it is not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, path, err
	}
	if len(data) > maxFile {
		return nil, path, fmt.Errorf("it is over %d bytes", maxFile)
	}
	return data, path, nil
}

// record is the trust record's name in the state directory for the
// project file at path.
func record(state, path string) string {
	h := sha256.Sum256([]byte(path))
	return filepath.Join(state, "trusted", hex.EncodeToString(h[:16]))
}

func sum(data []byte) string {
	h := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(h[:])
}

// untrusted says why data, read from path, is not trusted ("": it is).
func untrusted(state, path string, data []byte) string {
	if state == "" {
		return "no state directory to hold trust"
	}
	rec, err := os.ReadFile(record(state, path))
	if errors.Is(err, os.ErrNotExist) {
		return "never trusted"
	}
	if err != nil {
		return err.Error()
	}
	want, _, _ := strings.Cut(strings.TrimSpace(string(rec)), " ")
	if want != sum(data) {
		return "changed since it was trusted"
	}
	return ""
}

// Trust records, in the state directory, that dir's ProjectFile as it is
// now applies. It returns the file's path and the hash recorded. Outside
// every sandbox only: the state directory is never writable inside one.
func Trust(state, dir, home string) (path, hash string, err error) {
	if state == "" {
		return "", "", errors.New("no state directory (set HOME or XDG_STATE_HOME)")
	}
	data, path, err := ReadProject(dir)
	if err != nil {
		return path, "", err
	}
	if _, _, err := parse(path, data, Options{Home: home}, true); err != nil {
		return path, "", err
	}
	rec := record(state, path)
	if err := os.MkdirAll(filepath.Dir(rec), 0o700); err != nil {
		return path, "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(rec), ".trust-*")
	if err != nil {
		return path, "", err
	}
	defer os.Remove(tmp.Name())
	hash = sum(data)
	if _, err := fmt.Fprintf(tmp, "%s %s\n", hash, path); err != nil {
		tmp.Close()
		return path, "", err
	}
	if err := tmp.Close(); err != nil {
		return path, "", err
	}
	return path, hash, os.Rename(tmp.Name(), rec)
}

// Revoke removes dir's trust record; no record is no error.
func Revoke(state, dir string) (path string, err error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	if real, err = filepath.Abs(real); err != nil {
		return "", err
	}
	path = filepath.Join(real, ProjectFile)
	if err := os.Remove(record(state, path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return path, err
	}
	return path, nil
}
