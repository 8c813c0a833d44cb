package envreg

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
)

// Options configure a [Registry].
type Options struct {
	// Home is the configured harness home, the value of DSH_HOME. Blank
	// means: a non-blank $DSH_HOME, else ~/.dsh. A leading "~" or "~/" is
	// expanded; a relative path is made absolute against the working
	// directory when [New] runs; the result is cleaned.
	Home string
	// Getenv reads $DSH_HOME, once, in [New]. Nil means os.Getenv. The
	// process environment is never written.
	Getenv func(key string) string
	// UserHomeDir gives the user's home directory, for "~" and the
	// default ~/.dsh. Nil means os.UserHomeDir, falling back to the
	// account database when $HOME is unset.
	UserHomeDir func() (string, error)
}

// resolveHome returns the absolute, clean DSH_HOME of o.
func resolveHome(o Options) (string, error) {
	userHome := o.UserHomeDir
	if userHome == nil {
		userHome = defaultUserHomeDir
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}

	home := o.Home
	if strings.TrimSpace(home) == "" {
		home = getenv(KeyHome)
		if strings.TrimSpace(home) == "" {
			home = "~/.dsh"
		}
	}
	if home == "~" || strings.HasPrefix(home, "~/") {
		dir, err := userHome()
		if err != nil {
			return "", fmt.Errorf("envreg: cannot resolve %s %q: user home directory: %w", KeyHome, home, err)
		}
		if dir == "" {
			return "", fmt.Errorf("envreg: cannot resolve %s %q: user home directory is unknown", KeyHome, home)
		}
		home = filepath.Join(dir, home[1:])
	}
	abs, err := filepath.Abs(home)
	if err != nil {
		return "", fmt.Errorf("envreg: cannot resolve %s %q: %w", KeyHome, home, err)
	}
	return abs, nil
}

// defaultUserHomeDir is $HOME, else the home of the current user in the
// account database.
func defaultUserHomeDir() (string, error) {
	dir, err := os.UserHomeDir()
	if err == nil {
		return dir, nil
	}
	u, uerr := user.Current()
	if uerr != nil || u.HomeDir == "" {
		return "", errors.Join(err, uerr)
	}
	return u.HomeDir, nil
}
