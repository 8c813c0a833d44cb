package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// cachesCommand runs `caches [clean] [--cache-dir DIR]`: how much the
// confined commands added to the toolchain caches, or empty that.
func cachesCommand(argv, environ []string, stdout, stderr io.Writer) int {
	fail := failer(stderr, name, exitSetup)
	clean, store := false, ""
	for i := 1; i < len(argv); i++ {
		switch {
		case argv[i] == "clean" && !clean:
			clean = true
		case argv[i] == "--cache-dir" && i+1 < len(argv) && argv[i+1] != "":
			store = argv[i+1]
			i++
		default:
			return fail("usage error: %s caches [clean] [--cache-dir DIR], got %q", name, argv[i])
		}
	}
	if store == "" {
		home := lookupEnv(environ, "HOME")
		if !filepath.IsAbs(home) {
			return fail("caches: no absolute $HOME to find the cache store in: give --cache-dir DIR")
		}
		store = filepath.Join(home, modes.HomeCacheDir)
	} else if !filepath.IsAbs(store) {
		return fail("usage error: --cache-dir %q: want an absolute path", store)
	}
	if clean {
		busy, err := sandbox.CleanCaches(store)
		if err != nil {
			return fail("caches clean: %v", err)
		}
		fmt.Fprintf(stdout, "cleaned %s", store)
		if busy > 0 {
			fmt.Fprintf(stdout, " (%d in use by running commands, left as they are)", busy)
		}
		fmt.Fprintln(stdout)
		return 0
	}
	n, err := sandbox.CacheUsage(store)
	if err != nil {
		return fail("caches: %v", err)
	}
	fmt.Fprintf(stdout, "%s: %d bytes\n", store, n)
	return 0
}
