package main

import (
	"fmt"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
)

// childEnv builds the command's environment from the caller's (KEY=VALUE
// entries, in order): without every variable executor.Scrubbed names (the
// library's scrub), or empty with --clearenv; then each --keep-env name
// comes back from the caller's, each --unsetenv name goes, and each
// --setenv NAME=VALUE is set (the last one of a name wins).
func childEnv(parent []string, o options) ([]string, error) {
	keep := map[string]bool{}
	for _, n := range o.keepEnv {
		if err := checkEnvName("--keep-env", n); err != nil {
			return nil, err
		}
		keep[n] = true
	}
	unset := map[string]bool{}
	for _, n := range o.unsetenv {
		if err := checkEnvName("--unsetenv", n); err != nil {
			return nil, err
		}
		unset[n] = true
	}
	type kv struct{ name, value string }
	var set []kv
	for _, s := range o.setenv {
		n, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("usage error: --setenv %q: want NAME=VALUE", s)
		}
		if err := checkEnvName("--setenv", n); err != nil {
			return nil, err
		}
		set = append(set, kv{n, v})
	}

	var out []string
	index := map[string]int{} // name -> position in out
	put := func(n, v string) {
		if i, ok := index[n]; ok {
			out[i] = n + "=" + v
			return
		}
		index[n] = len(out)
		out = append(out, n+"="+v)
	}
	for _, e := range parent {
		n, v, ok := strings.Cut(e, "=")
		if !ok || n == "" || unset[n] {
			continue
		}
		if keep[n] || (!o.clearenv && !executor.Scrubbed(n)) {
			put(n, v)
		}
	}
	for _, e := range set {
		put(e.name, e.value)
	}
	return out, nil
}

func checkEnvName(flag, n string) error {
	if n == "" || strings.ContainsAny(n, "=\x00") {
		return fmt.Errorf("usage error: %s %q: not a variable name", flag, n)
	}
	return nil
}

// lookupEnv is the value of name in a KEY=VALUE list ("" when absent).
func lookupEnv(env []string, name string) string {
	for _, e := range env {
		if n, v, ok := strings.Cut(e, "="); ok && n == name {
			return v
		}
	}
	return ""
}
