package envreg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHome(t *testing.T) {
	cwd, err := os.Getwd()
	require.NoError(t, err)
	userHome := func() (string, error) { return "/home/u", nil }
	noUserHome := func() (string, error) { return "", errors.New("$HOME is not defined") }
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "DSH_HOME" {
				return v
			}
			return ""
		}
	}
	tests := []struct {
		name     string
		home     string
		env      string
		userHome func() (string, error)
		want     string
		wantErr  string
	}{
		{name: "configured wins over the environment", home: "/cfg", env: "/env", want: "/cfg"},
		{name: "environment", env: "/env", want: "/env"},
		{name: "blank configured falls to the environment", home: " \t", env: "/env", want: "/env"},
		{name: "default", want: "/home/u/.dsh"},
		{name: "blank environment falls to the default", env: "  \n", want: "/home/u/.dsh"},
		{name: "configured, cleaned", home: "/a/./b/../c/", want: "/a/c"},
		{name: "environment, cleaned", env: "/a//b/", want: "/a/b"},
		{name: "configured relative is made absolute", home: "rel/dsh", want: filepath.Join(cwd, "rel/dsh")},
		{name: "environment relative is made absolute", env: "./d", want: filepath.Join(cwd, "d")},
		{name: "configured ~", home: "~", want: "/home/u"},
		{name: "configured ~/", home: "~/cfg/dsh", want: "/home/u/cfg/dsh"},
		{name: "environment ~/", env: "~/envdsh", want: "/home/u/envdsh"},
		{name: "~user is not expanded", home: "~other/x", want: filepath.Join(cwd, "~other/x")},
		{name: "~ only at the start", home: "/a/~/b", want: "/a/~/b"},
		{name: "user home is cleaned", home: "~/x", userHome: func() (string, error) { return "/home/u/", nil }, want: "/home/u/x"},
		{name: "no user home, not needed", home: "/cfg", userHome: noUserHome, want: "/cfg"},
		{name: "no user home for the default", userHome: noUserHome,
			wantErr: `envreg: cannot resolve DSH_HOME "~/.dsh": user home directory: $HOME is not defined`},
		{name: "no user home for ~", env: "~/x", userHome: noUserHome,
			wantErr: `envreg: cannot resolve DSH_HOME "~/x": user home directory: $HOME is not defined`},
		{name: "empty user home", userHome: func() (string, error) { return "", nil },
			wantErr: `envreg: cannot resolve DSH_HOME "~/.dsh": user home directory is unknown`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Home: tt.home, Getenv: env(tt.env), UserHomeDir: tt.userHome}
			if o.UserHomeDir == nil {
				o.UserHomeDir = userHome
			}
			r, err := New(o)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				assert.Nil(t, r)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, r.Home())
			snap, err := r.Collect(context.Background(), Execution{})
			require.NoError(t, err)
			got, _ := snap.Get("DSH_HOME")
			assert.Equal(t, tt.want, got)
			assert.True(t, filepath.IsAbs(got))
		})
	}
}

// TestHomeProcessEnvironment: by default $DSH_HOME and $HOME come from the
// process environment, read once, in New.
func TestHomeProcessEnvironment(t *testing.T) {
	t.Setenv("HOME", "/home/p")
	t.Setenv("DSH_HOME", "/from/env")
	r, err := New(Options{})
	require.NoError(t, err)
	assert.Equal(t, "/from/env", r.Home())

	t.Setenv("DSH_HOME", "/changed")
	snap, err := r.Collect(context.Background(), Execution{})
	require.NoError(t, err)
	got, _ := snap.Get("DSH_HOME")
	assert.Equal(t, "/from/env", got, "read at New time")

	t.Setenv("DSH_HOME", " ")
	r, err = New(Options{})
	require.NoError(t, err)
	assert.Equal(t, "/home/p/.dsh", r.Home())

	os.Unsetenv("DSH_HOME")
	r, err = New(Options{Home: "~/h"})
	require.NoError(t, err)
	assert.Equal(t, "/home/p/h", r.Home())
}

func TestDefaultUserHomeDir(t *testing.T) {
	t.Setenv("HOME", "/home/p")
	dir, err := defaultUserHomeDir()
	require.NoError(t, err)
	assert.Equal(t, "/home/p", dir)

	os.Unsetenv("HOME")
	dir, err = defaultUserHomeDir()
	if err == nil {
		assert.True(t, filepath.IsAbs(dir), "from the account database: %q", dir)
	}
}
