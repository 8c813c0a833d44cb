//go:build linux

package integration

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A fake home: the test identity's HOME points at it (the real /root and
// the test user's home are never read), outside every writable root.
type fakeHome struct {
	dir                    string
	sshKey, aws, hist      string // secrets' contents
	known                  string // ~/.ssh/known_hosts' contents
	gitName, bashrcContent string
}

func newFakeHome(t *testing.T, id identity) fakeHome {
	t.Helper()
	n := nonce()
	h := fakeHome{dir: id.outside(t), sshKey: "SSH-KEY-" + n, aws: "AWS-SECRET-" + n, hist: "HISTORY-" + n,
		known: "KNOWN-HOSTS-" + n, gitName: "tester-" + n, bashrcContent: "BASHRC-" + n}
	id.mkdirAt(t, filepath.Join(h.dir, ".ssh"))
	id.mkdirAt(t, filepath.Join(h.dir, ".aws"))
	id.writeOwned(t, filepath.Join(h.dir, ".ssh/id_ed25519"), h.sshKey+"\n", 0o600)
	id.writeOwned(t, filepath.Join(h.dir, ".ssh/known_hosts"), h.known+"\n", 0o644)
	id.writeOwned(t, filepath.Join(h.dir, ".aws/credentials"), h.aws+"\n", 0o600)
	id.writeOwned(t, filepath.Join(h.dir, ".bash_history"), h.hist+"\n", 0o600)
	id.writeOwned(t, filepath.Join(h.dir, ".gitconfig"), "[user]\n\tname = "+h.gitName+"\n", 0o644)
	id.writeOwned(t, filepath.Join(h.dir, ".bashrc"), "# "+h.bashrcContent+"\n", 0o644)
	return h
}

func (h fakeHome) path(rel string) string { return filepath.Join(h.dir, rel) }

func (h fakeHome) env() []string { return []string{"HOME=" + h.dir} }

// requireNoBytes fails when a secret appears in the command's output.
func requireNoBytes(t *testing.T, r result, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(r.Stdout, s) || strings.Contains(r.Stderr, s) {
			t.Errorf("the secret %q was read: %v", s, r)
		}
	}
}

// maskedLayers returns the layers the report says hid path (nil: not masked).
func maskedLayers(rep *Report, path string) []string {
	for _, m := range rep.Enforcement.Masked {
		if m.Path == path {
			return m.Layers
		}
	}
	return nil
}

// secretsScript reads each secret (printing cat's status), lists ~/.ssh
// between brackets, reads the ordinary dotfiles, and ends with a cat of the
// secrets: its status is the command's.
const secretsScript = `cat ~/.ssh/id_ed25519; a=$?; cat ~/.aws/credentials; b=$?; cat ~/.bash_history; c=$?
echo "codes $a $b $c"
echo "ls:[$(ls -A ~/.ssh 2>&1 | tr '\n' ' ')]"
git config --global user.name; cat ~/.bashrc
cat ~/.ssh/id_ed25519 ~/.aws/credentials ~/.bash_history`

// TestSecretsUnreadable: in both confined modes, as root and as the test
// user, on this host and on each simulated one, the default secrets of the
// caller's home cannot be read (their bytes never appear, the reads fail),
// the report lists them with the layers that hid them and says which
// layer is missing; ordinary dotfiles (~/.gitconfig through git,
// ~/.bashrc) stay readable.
func TestSecretsUnreadable(t *testing.T) {
	hosts := append(append([]hostConfig{}, hostConfigs...), hostConfig{degradedDocker.name, &degradedDocker})
	forEachHostOf(t, hosts, func(t *testing.T, host hostConfig, id identity) {
		wrap := host.wrap()
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				h, ws := newFakeHome(t, id), id.workspace(t)
				r := id.run(t, runOpts{Wrap: wrap, Flags: sandboxFlags(mode, ws), Argv: bash(secretsScript), Env: h.env(), Dir: ws})
				requireNoBytes(t, r, h.sshKey, h.aws, h.hist, h.known)
				requireFailed(t, r)
				if !strings.Contains(r.Stdout, "codes ") || strings.Contains(r.Stdout, "codes 0") || strings.Contains(r.Stdout, " 0\n") {
					t.Errorf("a read of a secret succeeded: %v", r)
				}
				if !strings.Contains(r.Stdout, h.gitName+"\n") || !strings.Contains(r.Stdout, h.bashrcContent) {
					t.Errorf("~/.gitconfig (through git) or ~/.bashrc was not readable: %v", r)
				}
				rep := requireReport(t, r)
				mountView := contains(rep.Enforcement.Layers, "mount-view")
				landlock := contains(rep.Enforcement.Layers, "landlock")
				var want []string
				if mountView {
					want = append(want, "mount-view")
				}
				if landlock {
					want = append(want, "landlock")
				}
				for _, rel := range []string{".ssh", ".aws", ".bash_history"} {
					if got := maskedLayers(rep, h.path(rel)); !slices.Equal(got, want) {
						t.Errorf("report masked %s by %v, want %v (masked: %+v)", rel, got, want, rep.Enforcement.Masked)
					}
				}
				for _, rel := range []string{".gitconfig", ".bashrc", ".kube"} {
					if maskedLayers(rep, h.path(rel)) != nil {
						t.Errorf("report lists %s as masked", rel)
					}
				}
				if contains(rep.Enforcement.Missing, "secret-masks-mount") == mountView {
					t.Errorf("missing = %v with mount view %v", rep.Enforcement.Missing, mountView)
				}
				if contains(rep.Enforcement.Missing, "secret-masks-landlock") == landlock {
					t.Errorf("missing = %v with landlock %v", rep.Enforcement.Missing, landlock)
				}
				// The mount view shows an empty directory; Landlock
				// alone leaves the names listable (documented).
				if mountView && !strings.Contains(r.Stdout, "ls:[]") {
					t.Errorf("~/.ssh is not empty in the mount view: %v", r)
				}
				if !mountView && !strings.Contains(r.Stdout, "id_ed25519") {
					t.Errorf("Landlock alone: want the names listable, as documented: %v", r)
				}
				switch host.d {
				case nil:
					if !mountView || !landlock {
						t.Errorf("layers = %v on this host, want mount-view and landlock", rep.Enforcement.Layers)
					}
				case &degradedNoLandlock:
					if landlock || !mountView {
						t.Errorf("layers = %v without Landlock", rep.Enforcement.Layers)
					}
				default:
					if mountView || !landlock {
						t.Errorf("layers = %v without a mount view", rep.Enforcement.Layers)
					}
				}
			})
		}
	})
}

// TestSecretsFlags: --allow-read makes an entry (or a path under one)
// readable, --deny-read hides an extra path, danger-full-access hides
// nothing, and a bad flag is refused before anything runs.
func TestSecretsFlags(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		requireLandlock(t)
		for _, mode := range confinedModes {
			t.Run(mode+"/allow-read an entry", func(t *testing.T) {
				h, ws := newFakeHome(t, id), id.workspace(t)
				r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws, "--allow-read", h.path(".ssh")),
					Argv: bash(`cat ~/.ssh/id_ed25519; cat ~/.aws/credentials`), Env: h.env(), Dir: ws})
				requireFailed(t, r) // the second cat
				if !strings.Contains(r.Stdout, h.sshKey) {
					t.Errorf("--allow-read ~/.ssh: the key is not readable: %v", r)
				}
				requireNoBytes(t, r, h.aws)
				rep := requireReport(t, r)
				if maskedLayers(rep, h.path(".ssh")) != nil || maskedLayers(rep, h.path(".aws")) == nil {
					t.Errorf("masked = %+v, want .aws and not .ssh", rep.Enforcement.Masked)
				}
			})
			t.Run(mode+"/allow-read under an entry", func(t *testing.T) {
				h, ws := newFakeHome(t, id), id.workspace(t)
				r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws, "--allow-read", h.path(".ssh/known_hosts")),
					Argv: bash(`cat ~/.ssh/known_hosts && cat ~/.ssh/id_ed25519`), Env: h.env(), Dir: ws})
				requireFailed(t, r)
				if !strings.Contains(r.Stdout, h.known) {
					t.Errorf("--allow-read ~/.ssh/known_hosts: not readable: %v", r)
				}
				requireNoBytes(t, r, h.sshKey)
				rep := requireReport(t, r)
				if maskedLayers(rep, h.path(".ssh/id_ed25519")) == nil || maskedLayers(rep, h.path(".ssh")) != nil {
					t.Errorf("masked = %+v, want ~/.ssh/id_ed25519 instead of ~/.ssh", rep.Enforcement.Masked)
				}
			})
			t.Run(mode+"/deny-read an extra file", func(t *testing.T) {
				h, ws := newFakeHome(t, id), id.workspace(t)
				extra, inWS := h.path("notes.txt"), filepath.Join(ws, ".env")
				id.writeOwned(t, extra, "EXTRA-"+h.sshKey+"\n", 0o644)
				id.writeOwned(t, inWS, "DOTENV-"+h.sshKey+"\n", 0o644)
				r := id.run(t, runOpts{Flags: sandboxFlags(mode, ws, "--deny-read", extra, "--deny-read", inWS),
					Argv: bash(`cat ~/notes.txt; cat .env; cat ~/.bashrc`), Env: h.env(), Dir: ws})
				if mode == "workspace-write" && simulatedHostLacks("mount-view") {
					// .env lies in a writable root, where only a mount view
					// hides it: refused (TestSecretsNeedMountView).
					requireSetupRefused(t, r)
					if want := "cannot hide " + inWS + " without a mount view"; !strings.Contains(r.Stderr, want) {
						t.Errorf("%s: stderr = %q, want %q", simulatedHostName(), r.Stderr, want)
					}
					requireNoBytes(t, r, "EXTRA-", "DOTENV-")
					return
				}
				requireExit(t, r, 0) // the last cat
				requireNoBytes(t, r, "EXTRA-", "DOTENV-")
				rep := requireReport(t, r)
				if maskedLayers(rep, extra) == nil || maskedLayers(rep, inWS) == nil {
					t.Errorf("masked = %+v, want %s and %s", rep.Enforcement.Masked, extra, inWS)
				}
				if mode == "workspace-write" && slices.Contains(maskedLayers(rep, inWS), "landlock") {
					t.Errorf("%s lies in a writable root: the mount view's alone, got %v", inWS, maskedLayers(rep, inWS))
				}
			})
		}
		t.Run("danger-full-access reads it", func(t *testing.T) {
			h, ws := newFakeHome(t, id), id.workspace(t)
			r := id.run(t, runOpts{Flags: sandboxFlags("danger-full-access", ws), Argv: bash(`cat ~/.ssh/id_ed25519`), Env: h.env(), Dir: ws})
			requireExit(t, r, 0)
			if !strings.Contains(r.Stdout, h.sshKey) {
				t.Errorf("danger-full-access cannot read the key: %v", r)
			}
			if rep := requireReport(t, r); len(rep.Enforcement.Masked) != 0 {
				t.Errorf("danger-full-access masked %+v", rep.Enforcement.Masked)
			}
		})
		for _, tc := range []struct {
			name  string
			mode  string
			flags func(h fakeHome) []string
			want  string
		}{
			{"allow-read outside the set", "read-only", func(h fakeHome) []string { return []string{"--allow-read", h.path(".gitconfig")} }, "not in the deny-read set"},
			{"relative deny-read", "read-only", func(fakeHome) []string { return []string{"--deny-read", "notes.txt"} }, "not an absolute path"},
			{"deny-read of the workspace's parent", "workspace-write", func(h fakeHome) []string { return []string{"--deny-read", "/tmp"} }, "contains the workspace"},
			{"deny-read in danger-full-access", "danger-full-access", func(h fakeHome) []string { return []string{"--deny-read", h.path("notes.txt")} }, "need a confined mode"},
		} {
			t.Run("refused/"+tc.name, func(t *testing.T) {
				h, ws := newFakeHome(t, id), id.workspace(t)
				marker := filepath.Join(ws, "ran")
				r := id.run(t, runOpts{Flags: sandboxFlags(tc.mode, ws, tc.flags(h)...), Argv: bash(`: > ` + marker), Env: h.env(), Dir: ws})
				requireSetupRefused(t, r)
				if !strings.Contains(r.Stderr, tc.want) {
					t.Errorf("stderr %q lacks %q", r.Stderr, tc.want)
				}
				requireAbsent(t, marker)
			})
		}
	})
}

// TestSecretsWorkspaceInHome: a workspace inside the home still works —
// read and write in workspace-write, read in read-only — while the
// home's secrets stay hidden, on this host and with Landlock alone.
func TestSecretsWorkspaceInHome(t *testing.T) {
	forEachHostOf(t, []hostConfig{hostConfigs[0], {degradedNoUserNS.name, &degradedNoUserNS}}, func(t *testing.T, host hostConfig, id identity) {
		wrap := host.wrap()
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				h := newFakeHome(t, id)
				ws := h.path("proj")
				id.mkdirAt(t, ws)
				id.writeOwned(t, filepath.Join(ws, "README"), "readme\n", 0o644)
				script := `cat README; cat ~/.ssh/id_ed25519; echo "key $?"`
				if mode == "workspace-write" {
					script += `; echo data > new && mkdir sub && echo more > sub/f && cat new sub/f`
				}
				r := id.run(t, runOpts{Wrap: wrap, Flags: sandboxFlags(mode, ws), Argv: bash(script), Env: h.env(), Dir: ws})
				requireExit(t, r, 0)
				requireNoBytes(t, r, h.sshKey)
				if !strings.Contains(r.Stdout, "readme\n") || strings.Contains(r.Stdout, "key 0") {
					t.Errorf("workspace unreadable or key read: %v", r)
				}
				if mode == "workspace-write" {
					if !strings.Contains(r.Stdout, "data\nmore\n") {
						t.Errorf("workspace writes did not read back: %v", r)
					}
					requireContent(t, filepath.Join(ws, "sub/f"), "more\n")
				}
			})
		}
	})
}

// TestSecretsNeedMountView: a masked path only the mount view can hide (a
// home inside the writable /tmp) fails closed on a host without one.
func TestSecretsNeedMountView(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		wrap := degradedNoUserNS.prepare(t, id)
		home := id.workspace(t) // under /tmp
		id.mkdirAt(t, filepath.Join(home, ".ssh"))
		id.writeOwned(t, filepath.Join(home, ".ssh/id_ed25519"), "KEY\n", 0o600)
		ws := id.workspace(t)
		marker := filepath.Join(ws, "ran")
		r := id.run(t, runOpts{Wrap: wrap, Flags: sandboxFlags("workspace-write", ws), Argv: bash(`: > ` + marker), Env: []string{"HOME=" + home}, Dir: ws})
		requireSetupRefused(t, r)
		if !strings.Contains(r.Stderr, "cannot hide "+filepath.Join(home, ".ssh")+" without a mount view") {
			t.Errorf("stderr = %q", r.Stderr)
		}
		requireAbsent(t, marker)
		// Read-only has no writable root: Landlock hides it.
		r = id.run(t, runOpts{Wrap: wrap, Flags: sandboxFlags("read-only", ws), Argv: bash(`cat ~/.ssh/id_ed25519`), Env: []string{"HOME=" + home}, Dir: ws})
		requireFailed(t, r)
		requireNoBytes(t, r, "KEY")
	})
}
