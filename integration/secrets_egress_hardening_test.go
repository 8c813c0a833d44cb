//go:build linux

package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The secrets the default set once missed, the egress proxy's
// per-command bound, and --deny-domain addresses behind allowed names.
// (The MCP server's generated token: cmd/dsh-sandbox-mcp,
// TestHTTPGeneratedTokenHidden.)

// TestSecretsSiblingsUnreadable: the standard credential locations beside
// the obvious ones cannot be read in the confined modes, with the mount
// view and with Landlock alone — git's XDG credential store (so git's
// credential helper finds nothing), libpq's password file, an agent's
// token, and as root the backups of the shadow files and the TLS private
// keys — while the files everyday tools read beside them stay readable:
// git reads its XDG config, /etc/passwd and the CA certificates read.
func TestSecretsSiblingsUnreadable(t *testing.T) {
	forEachHostOf(t, []hostConfig{hostConfigs[0], {degradedNoUserNS.name, &degradedNoUserNS}}, func(t *testing.T, host hostConfig, id identity) {
		wrap := host.wrap()
		for _, mode := range confinedModes {
			t.Run(mode, func(t *testing.T) {
				h, ws := newFakeHome(t, id), id.workspace(t)
				n := nonce()
				gitToken, pgpass, agent, email := "GIT-XDG-TOKEN-"+n, "PGPASS-"+n, "AGENT-TOKEN-"+n, "xdg-"+n+"@example.test"
				for _, d := range []string{".config", ".config/git", ".claude"} {
					id.mkdirAt(t, h.path(d))
				}
				id.writeOwned(t, h.path(".config/git/credentials"), "https://tester:"+gitToken+"@git.example.test\n", 0o600)
				id.writeOwned(t, h.path(".config/git/config"), "[user]\n\temail = "+email+"\n", 0o644)
				id.writeOwned(t, h.path(".pgpass"), "db.example.test:5432:*:tester:"+pgpass+"\n", 0o600)
				id.writeOwned(t, h.path(".claude/.credentials.json"), `{"token":"`+agent+`"}`+"\n", 0o600)
				id.writeOwned(t, h.path(".claude/settings.json"), "{}\n", 0o644)
				script := `git config user.email
printf 'protocol=https\nhost=git.example.test\n\n' | GIT_TERMINAL_PROMPT=0 git -c credential.helper=store credential fill; echo "fill $?"
cat ~/.config/git/credentials; echo "git-credentials $?"
cat ~/.pgpass; echo "pgpass $?"
cat ~/.claude/.credentials.json; echo "agent $?"
cat ~/.claude/settings.json >/dev/null; echo "settings $?"
head -c 5 /etc/passwd >/dev/null; echo "passwd $?"`
				var rootSecrets []string
				if id.isRoot() {
					for _, p := range []string{"/etc/shadow-", "/etc/gshadow-", "/etc/ssl/private", "/etc/security/opasswd"} {
						if exists(p) {
							rootSecrets = append(rootSecrets, p)
						}
					}
					script += "\ncat /etc/shadow- /etc/gshadow- /etc/ssl/private/* /etc/security/opasswd; echo \"root $?\""
				}
				r := id.run(t, runOpts{Wrap: wrap, Flags: sandboxFlags(mode, ws), Argv: bash(script), Env: h.env(), Dir: ws})
				requireExit(t, r, 0)
				requireNoBytes(t, r, gitToken, pgpass, agent)
				for _, want := range []string{email, "git-credentials 1", "pgpass 1", "agent 1", "settings 0", "passwd 0"} {
					if !hasLine(r.Stdout, want) {
						t.Errorf("stdout lacks %q: %v", want, r)
					}
				}
				if hasLine(r.Stdout, "fill 0") || strings.Contains(r.Stdout, "password=") {
					t.Errorf("git's credential helper found the XDG credentials: %v", r)
				}
				rep := requireReport(t, r)
				for _, rel := range []string{".config/git/credentials", ".pgpass", ".claude/.credentials.json"} {
					if maskedLayers(rep, h.path(rel)) == nil {
						t.Errorf("report does not list %s as masked: %+v", rel, rep.Enforcement.Masked)
					}
				}
				for _, rel := range []string{".config/git/config", ".config/git", ".claude/settings.json"} {
					if maskedLayers(rep, h.path(rel)) != nil {
						t.Errorf("report lists %s as masked", rel)
					}
				}
				if !id.isRoot() {
					return
				}
				if hasLine(r.Stdout, "root 0") {
					t.Errorf("a root secret was read: %v", r)
				}
				for _, p := range rootSecrets {
					if maskedLayers(rep, p) == nil {
						t.Errorf("report does not list %s as masked: %+v", p, rep.Enforcement.Masked)
					}
					// No line of the file (a hash, a key) reached the output.
					files := []string{p}
					if st, err := os.Stat(p); err == nil && st.IsDir() {
						files, _ = filepath.Glob(filepath.Join(p, "*"))
					}
					for _, f := range files {
						b, err := os.ReadFile(f)
						if err != nil {
							t.Fatal(err)
						}
						for _, line := range strings.Split(string(b), "\n") {
							if len(line) >= 16 && strings.Contains(r.Stdout+r.Stderr, line) {
								t.Errorf("a line of %s was read: %q", f, line)
							}
						}
					}
				}
			})
		}
	})
}

// listenOn is an HTTP server at addr (hello) that counts its connections.
func listenOn(t *testing.T, addr string) (*net.TCPListener, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(hello), ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			n.Add(1)
		}
	}}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.(*net.TCPListener), &n
}

// TestEgressDenyDomainAddresses: a --deny-domain IP or CIDR refuses the
// addresses an allowed name resolves to, even where an IP pattern allows
// them: the name is refused with a fact naming the address, the server
// there sees nothing, and an allowed name beside it is reached.
func TestEgressDenyDomainAddresses(t *testing.T) {
	denied, deniedConns := listenOn(t, "127.0.0.2:0")
	allowed, allowedConns := listenOn(t, "127.0.0.3:0")
	dp, ap := denied.Addr().(*net.TCPAddr).Port, allowed.Addr().(*net.TCPAddr).Port
	forEachEgressConfig(t, func(t *testing.T, id identity, d *degradation, wrap []string, ws string) {
		before := allowedConns.Load()
		flags := sandboxFlags("workspace-write", ws,
			"--allow-domain", "*.corp.test", "--allow-domain", "127.0.0.0/8",
			"--deny-domain", "127.0.0.2", "--deny-domain", "10.0.0.0/8",
			"--resolve", "a.corp.test=127.0.0.2", "--resolve", "b.corp.test=10.1.2.3", "--resolve", "ok.corp.test=127.0.0.3")
		script := fmt.Sprintf(`
curl -sS --max-time 60 http://a.corp.test:%[1]d/a; echo
curl -sS --max-time 60 -x "$ALL_PROXY" http://a.corp.test:%[1]d/socks && echo "REACHED a over SOCKS"
curl -sS --max-time 60 -p http://b.corp.test:%[1]d/b; echo
curl -sS --fail --max-time 60 http://ok.corp.test:%[2]d/ok`, dp, ap)
		r := id.run(t, runOpts{Flags: flags, Argv: bash(script), Dir: ws, Wrap: wrap, Timeout: 3 * time.Minute})
		requireExit(t, r, 0)
		if n := deniedConns.Load(); n != 0 {
			t.Errorf("the server at the denied address saw %d connections", n)
		}
		if strings.Contains(r.Stdout, "REACHED") || strings.Contains(r.Stdout, "hello from a.corp.test") {
			t.Errorf("a denied address was reached: %q", r.Stdout)
		}
		if !hasLine(r.Stdout, fmt.Sprintf("hello from ok.corp.test:%d/ok", ap)) || allowedConns.Load() == before {
			t.Errorf("the allowed name was not reached: %v", r)
		}
		body := fmt.Sprintf("dsh-sandbox: connect to a.corp.test:%d denied (workspace-write mode, resolves to a denied address 127.0.0.2); a --deny-domain pattern matches 127.0.0.2", dp)
		if !hasLine(r.Stdout, body) {
			t.Errorf("the proxy's 403 body is not %q: stdout %q", body, r.Stdout)
		}
		requireEgressDenial(t, r, fmt.Sprintf("a.corp.test:%d", dp), "proxy", "resolves to a denied address 127.0.0.2")
		requireEgressDenial(t, r, fmt.Sprintf("b.corp.test:%d", dp), "proxy", "resolves to a denied address 10.1.2.3")
	})
}

// TestEgressConnectionLimit: the egress proxy holds at most 256 open
// connections for one command. The command opens 256 CONNECT tunnels and
// keeps them; the 257th gets a 503 naming the limit, reaches nothing, and
// is a "proxy-connections" limit fact (not a denial). Once the command
// closes its tunnels it is served again, and forty parallel clients work.
func TestEgressConnectionLimit(t *testing.T) {
	echo := echoServer(t)
	plain := serveHTTP(t, nil, http.HandlerFunc(hello))
	forEachEgressConfig(t, func(t *testing.T, id identity, d *degradation, wrap []string, ws string) {
		before := echo.conns.Load()
		flags := sandboxFlags("workspace-write", ws, "--allow-domain", "127.0.0.1", "--allow-domain", "pkg.test", "--resolve", "pkg.test=127.0.0.1")
		script := fmt.Sprintf(`python3 - <<'EOF'
import os, socket, time
host, port = os.environ["HTTP_PROXY"].split("//")[1].rsplit(":", 1)
def tunnel():
    s = socket.create_connection((host, int(port)))
    s.sendall(b"CONNECT 127.0.0.1:%[1]d HTTP/1.1\r\nHost: 127.0.0.1:%[1]d\r\n\r\n")
    resp = b""
    while b"\r\n\r\n" not in resp:
        chunk = s.recv(4096)
        if not chunk:
            break
        resp += chunk
    return s, resp
held = []
for i in range(256):
    s, resp = tunnel()
    if not resp.startswith(b"HTTP/1.1 200"):
        print("tunnel", i, "refused:", resp)
        break
    s.sendall(b"ping\n")
    if s.recv(64) != b"echo: ping\n":
        print("tunnel", i, "broken")
    held.append(s)
print("held", len(held))
s, resp = tunnel()
s.settimeout(20)  # a tunnel (were the limit not held) never ends
while True:
    try:
        chunk = s.recv(4096)
    except socket.timeout:
        break
    if not chunk:
        break
    resp += chunk
s.close()
head, _, body = resp.partition(b"\r\n\r\n")
print("over:", head.split(b"\r\n")[0].decode())
print(body.decode().strip())
for s in held:
    s.close()
for i in range(%[2]s):
    s, resp = tunnel()
    if resp.startswith(b"HTTP/1.1 200"):
        print("served again")
        s.close()
        break
    s.close()
    time.sleep(0.05)
EOF
for i in $(seq 40); do curl -sS --max-time 60 -o /dev/null -w '%%{http_code}\n' http://pkg.test:%[3]d/p & done; wait`, echo.port, tries(200), plain.port)
		r := id.run(t, runOpts{Flags: flags, Argv: bash(script), Dir: ws, Wrap: wrap, Timeout: 5 * time.Minute})
		requireExit(t, r, 0)
		for _, want := range []string{
			"held 256",
			"over: HTTP/1.1 503 Service Unavailable",
			fmt.Sprintf("dsh-sandbox: connect to 127.0.0.1:%d denied (workspace-write mode, over the egress proxy's limit of 256 open connections per command); close some of the command's connections, then retry", echo.port),
			"served again",
		} {
			if !hasLine(r.Stdout, want) {
				t.Errorf("stdout lacks %q: %v", want, r)
			}
		}
		if n := countLines(r.Stdout, "200"); n != 40 {
			t.Errorf("%d of 40 parallel clients got 200: %q", n, r.Stdout)
		}
		// 256 tunnels and the one served again; the refused one reached nothing.
		if n := echo.conns.Load() - before; n != 257 {
			t.Errorf("the destination saw %d connections, want 257", n)
		}
		rep := requireReport(t, r)
		found := false
		for _, dn := range rep.Denials {
			switch {
			case dn.Op == "limit" && dn.Address == "proxy-connections":
				found = true
				if dn.Syscall != "proxy" || dn.Errno != "EAGAIN" || dn.Count < 1 ||
					dn.Reason != "over the egress proxy's limit of 256 open connections per command" {
					t.Errorf("limit fact %+v", dn)
				}
			default:
				t.Errorf("unexpected fact %+v", dn)
			}
		}
		if !found {
			t.Errorf("no proxy-connections limit fact: %v", rep.Denials)
		}
		if line := cliPrefix + "limit proxy-connections hit: proxy EAGAIN (workspace-write mode)"; !hasLine(r.Stderr, line) {
			t.Errorf("stderr lacks %q: %q", line, r.Stderr)
		}
	})
}

// countLines counts the lines of s equal to want.
func countLines(s, want string) int {
	n := 0
	for _, l := range lines(s) {
		if l == want {
			n++
		}
	}
	return n
}
