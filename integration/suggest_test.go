//go:build linux

package integration

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// suggestionFor returns the report's suggestion for the denial of op on
// target, checking its stderr line carries it.
func suggestionFor(t *testing.T, r result, op, target string) (flag, cannot string) {
	t.Helper()
	for _, d := range requireReport(t, r).Denials {
		if d.Op != op || d.target() != target {
			continue
		}
		if d.Suggest == nil {
			t.Fatalf("denial %v has no suggestion", d)
		}
		if !strings.Contains(r.Stderr, d.suffix()) {
			t.Errorf("stderr lacks the suggestion %q: %q", d.suffix(), r.Stderr)
		}
		return d.Suggest.Flag, d.Suggest.Cannot
	}
	t.Fatalf("no denial of %s %s: %v", op, target, requireReport(t, r).Denials)
	return "", ""
}

// TestDenialSuggestionsAllow: each denial says which flag allows exactly
// it, and running again with exactly that flag succeeds: a write outside
// the writable roots, a write in the workspace under read-only, a name not
// in the allowlist, then the private address it resolves to.
func TestDenialSuggestionsAllow(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		ws, out := id.workspace(t), id.outside(t)
		target := filepath.Join(out, "sub", "f")
		script := bash(`mkdir -p ` + filepath.Dir(target) + ` && echo x > ` + target)
		r := id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws), Argv: script, Dir: ws})
		requireFailed(t, r)
		requireAbsent(t, filepath.Join(out, "sub"))
		flag, _ := suggestionFor(t, r, "mkdir", filepath.Join(out, "sub"))
		if want := "--allow-write " + out; flag != want {
			t.Fatalf("suggestion %q, want %q", flag, want)
		}
		r = id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws, strings.Fields(flag)...), Argv: script, Dir: ws})
		requireExit(t, r, 0)
		requireContent(t, target, "x\n")

		r = id.run(t, runOpts{Flags: sandboxFlags("read-only", ws), Argv: bash(`echo y > y`), Dir: ws})
		requireFailed(t, r)
		requireAbsent(t, filepath.Join(ws, "y"))
		flag, _ = suggestionFor(t, r, "write", filepath.Join(ws, "y"))
		if flag != "--mode workspace-write" {
			t.Fatalf("suggestion %q, want --mode workspace-write", flag)
		}
		r = id.run(t, runOpts{Flags: append([]string{"--workspace", ws}, strings.Fields(flag)...), Argv: bash(`echo y > y`), Dir: ws})
		requireExit(t, r, 0)
		requireContent(t, filepath.Join(ws, "y"), "y\n")

		// A protected name: --unprotect NAME; a secret: why not.
		r = id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws), Argv: bash(`echo x > .envrc; true`), Dir: ws})
		if flag, _ = suggestionFor(t, r, "write", filepath.Join(ws, ".envrc")); flag != "--unprotect .envrc" {
			t.Errorf("suggestion for .envrc %q, want --unprotect .envrc", flag)
		}
		requireAbsent(t, filepath.Join(ws, ".envrc"))
	})
}

// TestDenialSuggestionsNetwork: a name not in the allowlist suggests
// --allow-domain NAME; given that, the private address it resolves to
// suggests --allow-domain ADDR; given both, the listener is reached — and
// not before.
func TestDenialSuggestionsNetwork(t *testing.T) {
	srv := serveHTTP(t, nil, http.HandlerFunc(hello))
	forEachEgressConfig(t, func(t *testing.T, id identity, d *degradation, wrap []string, ws string) {
		before := srv.conns.Load() // the earlier subtests' connections
		url := fmt.Sprintf("http://mirror.test:%d/x", srv.port)
		flags := sandboxFlags("workspace-write", ws, "--allow-domain", "other.test", "--resolve", "mirror.test=127.0.0.1")
		run := func(extra ...string) result {
			return id.run(t, runOpts{Flags: append(append([]string{}, flags...), extra...), Argv: bash(`curl -fsS --max-time 60 ` + url), Dir: ws, Wrap: wrap, Timeout: 3 * time.Minute})
		}
		r := run()
		requireFailed(t, r)
		flag, _ := suggestionFor(t, r, "connect", fmt.Sprintf("mirror.test:%d", srv.port))
		if flag != "--allow-domain mirror.test" {
			t.Fatalf("suggestion %q, want --allow-domain mirror.test", flag)
		}
		r = run(strings.Fields(flag)...)
		requireFailed(t, r)
		flag2, _ := suggestionFor(t, r, "connect", fmt.Sprintf("mirror.test:%d", srv.port))
		if flag2 != "--allow-domain 127.0.0.1" {
			t.Fatalf("suggestion %q, want --allow-domain 127.0.0.1", flag2)
		}
		if n := srv.conns.Load() - before; n != 0 {
			t.Fatalf("the listener saw %d connections before it was allowed", n)
		}
		r = run(append(strings.Fields(flag), strings.Fields(flag2)...)...)
		requireExit(t, r, 0)
		if !strings.Contains(r.Stdout, "hello from mirror.test") {
			t.Errorf("stdout %q, want the listener's answer", r.Stdout)
		}
	})
}
