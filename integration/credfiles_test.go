//go:build linux

package integration

import (
	"os/exec"
	"strings"
	"testing"
)

// credentialScript reads the credential files, writes to one, and asks npm
// for its registry (when npm is installed).
const credentialScript = `cat ~/.npmrc; echo "npmrc:$?"
cat ~/.docker/config.json; echo "docker:$?"
cat ~/.config/pip/pip.conf; echo "pip:$?"
echo '//x/:_authToken=planted' >> ~/.npmrc; echo "write:$?"
if command -v npm >/dev/null; then echo "npm registry: $(npm config get registry 2>&1 | tail -1)"; fi
exit 0`

// TestCredentialFilesSanitized: as root and as the test user, on this host
// and on each simulated one, a confined command with a mount view reads
// ~/.npmrc, ~/.docker/config.json and a pip.conf with a password as copies
// without their secrets — the registry, the credential helper and the
// mirror kept, npm sees the registry — and a write to one fails with EROFS,
// the original unchanged; without a mount view each is hidden whole. The
// probe and the report say which.
func TestCredentialFilesSanitized(t *testing.T) {
	t.Parallel()
	_, npmErr := exec.LookPath("npm")
	hosts := append(append([]hostConfig{}, hostConfigs...), hostConfig{degradedDocker.name, &degradedDocker})
	forEachHostOf(t, hosts, func(t *testing.T, host hostConfig, id identity) {
		n := nonce()
		h, ws := newFakeHome(t, id), id.workspace(t)
		token, auth, pw := "NPM-TOKEN-"+n, "DOCKER-AUTH-"+n, "PIP-PW-"+n
		npmrc := "registry=https://registry.example.test/\n//registry.example.test/:_authToken=" + token + "\n"
		id.writeOwned(t, h.path(".npmrc"), npmrc, 0o600)
		id.mkdirAt(t, h.path(".docker"))
		id.writeOwned(t, h.path(".docker/config.json"), `{"auths":{"ghcr.io":{"auth":"`+auth+`"}},"credsStore":"pass-`+n+`"}`, 0o600)
		id.mkdirAt(t, h.path(".config"))
		id.mkdirAt(t, h.path(".config/pip"))
		id.writeOwned(t, h.path(".config/pip/pip.conf"), "[global]\nindex-url = https://user:"+pw+"@pypi.example.test/simple\n", 0o644)

		r := id.run(t, runOpts{Wrap: host.wrap(), Flags: sandboxFlags("workspace-write", ws), Argv: bash(credentialScript), Env: h.env(), Dir: ws})
		requireExit(t, r, 0)
		requireNoBytes(t, r, token, auth, pw)
		if got := readFile(t, h.path(".npmrc")); got != npmrc {
			t.Errorf("~/.npmrc changed on the host: %q", got)
		}
		rep := requireReport(t, r)
		mountView := contains(rep.Enforcement.Layers, "mount-view")
		if mountView != host.onHost().mountView() {
			t.Fatalf("mount view %v on %s", mountView, host.name)
		}
		pr := id.run(t, runOpts{Wrap: host.wrap(), Flags: []string{"--probe", "--json"}, NoReport: true, Dir: ws})
		want := map[bool]string{true: "sanitized", false: "hidden"}[mountView]
		if p := parseProbe(t, pr); p.CredentialFiles != want {
			t.Errorf("probe credentialFiles = %q, want %q", p.CredentialFiles, want)
		}
		for _, rel := range []string{".npmrc", ".docker/config.json", ".config/pip/pip.conf"} {
			found := false
			for _, m := range rep.Enforcement.Masked {
				if m.Path == h.path(rel) {
					found = true
					if m.Sanitized != mountView {
						t.Errorf("report: %s sanitized = %v, want %v", rel, m.Sanitized, mountView)
					}
				}
			}
			if !found {
				t.Errorf("report does not list %s as masked: %+v", rel, rep.Enforcement.Masked)
			}
		}
		if !mountView {
			for _, s := range []string{"npmrc:0", "docker:0", "pip:0", "write:0", "registry.example.test"} {
				if strings.Contains(r.Stdout, s) {
					t.Errorf("without a mount view the credential files are hidden whole, yet stdout has %q: %v", s, r)
				}
			}
			return
		}
		for _, s := range []string{"registry=https://registry.example.test/\nnpmrc:0", `"credsStore": "pass-` + n + `"`, "docker:0",
			"index-url = https://pypi.example.test/simple\npip:0", "write:1"} {
			if !strings.Contains(r.Stdout, s) {
				t.Errorf("stdout lacks %q: %v", s, r)
			}
		}
		if !strings.Contains(r.Stderr, "Read-only file system") {
			t.Errorf("a write to the copy is not EROFS: %v", r)
		}
		if npmErr == nil && !strings.Contains(r.Stdout, "npm registry: https://registry.example.test/") {
			t.Errorf("npm does not see the registry of ~/.npmrc: %v", r)
		}
		if strings.Contains(r.Stdout, "planted") || strings.Contains(readFile(t, h.path(".npmrc")), "planted") {
			t.Errorf("the write reached a credential file: %v", r)
		}
		for _, d := range rep.Denials {
			if d.Path == h.path(".npmrc") && (d.Suggest == nil || !strings.Contains(d.Suggest.Cannot, "copy without its secrets")) {
				t.Errorf("the denial of the write does not say it is a sanitized copy: %+v", d)
			}
		}
	})
}
