//go:build linux

package integration

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-sandbox/dsh-sandbox/internal/testtime"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// The network allowlist (docs/DESIGN.md, "Network allowlist"): the command
// reaches named destinations only through the sandbox's egress proxy, which
// resolves names itself (here: --resolve pins them to loopback servers of
// this test) and dials only what the allowlist allows; a refusal is a
// denial fact, and the refused server sees nothing. Every server is on
// loopback; a loopback address is dialed only because --allow-domain
// 127.0.0.1 allows it explicitly.

// egressConfigs are the hosts the allowlist is tested on: as it is (the
// command in a net namespace of its own, reaching the proxy through
// listeners inside it) and without user namespaces (no net namespace: the
// supervisor connects the command's sockets to the proxy itself). Under
// DSH_IT_HOST "as it is" is the simulated host (onHost), run once.
func egressConfigs() []*degradation { return hostsOnce(nil, &degradedNoUserNS) }

// forEachEgressConfig runs f for each identity and egress configuration,
// with the configuration's wrap and a fresh workspace; f's d is the host
// the command runs on (nil: this host as it is).
func forEachEgressConfig(t *testing.T, f func(t *testing.T, id identity, d *degradation, wrap []string, ws string)) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, d := range egressConfigs() {
			t.Run(configName(d), func(t *testing.T) {
				wrap := d.prepare(t, id)
				if slices.Contains(hostFilters[d], "pidfd_getfd") {
					requireAllowlistRefused(t, id, wrap)
					return
				}
				f(t, id, d, wrap, id.workspace(t))
			})
		}
	})
}

// allowlistRefusal is the one line a host without pidfd_getfd (Docker's
// default seccomp profile) answers an allowlist with: the supervisor cannot
// connect the command's sockets to the proxy there.
const allowlistRefusal = "dsh-sandbox-run: a network allowlist needs seccomp user notification with pidfd_getfd " +
	"(Linux 5.9 or later, and a seccomp profile that allows pidfd_getfd: Docker's default allows it only with " +
	"--cap-add SYS_PTRACE), which this host does not offer"

// requireAllowlistRefused checks that an allowlist is refused before the
// command starts, with allowlistRefusal and exit 125: on a host that cannot
// route the command through the proxy nothing runs, with no network or with
// all of it.
func requireAllowlistRefused(t *testing.T, id identity, wrap []string) {
	t.Helper()
	ws := id.workspace(t)
	r := id.run(t, runOpts{Flags: sandboxFlags("workspace-write", ws, "--allow-domain", "registry.test"),
		Argv: bash("touch ran"), Dir: ws, Wrap: wrap, NoReport: true})
	requireExit(t, r, 125)
	if got := strings.TrimSpace(r.Stderr); got != allowlistRefusal {
		t.Errorf("stderr = %q, want the one line %q", got, allowlistRefusal)
	}
	requireAbsent(t, filepath.Join(ws, "ran"))
	t.Log("the allowlist is refused on this host (no pidfd_getfd), so the rest of this test has no subject")
}

func configName(d *degradation) string {
	if d == nil {
		return "this host"
	}
	return d.name
}

// testCA is a CA and a server certificate for the test names, with the CA
// written to a file every identity can read.
type testCA struct {
	pool   *x509.CertPool
	cert   tls.Certificate
	caFile string
}

func newTestCA(t *testing.T, names ...string) testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dsh-sandbox test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/tmp", "dsh-it-ca-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testCA{pool: pool, caFile: caFile, cert: tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}}
}

// countingServer is an HTTP(S) server on loopback that counts the
// connections it accepted.
type countingServer struct {
	port  int
	conns atomic.Int64
}

func serveHTTP(t *testing.T, tlsCert *tls.Certificate, h http.Handler) *countingServer {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &countingServer{port: ln.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}}
	if tlsCert != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*tlsCert}}
		go srv.ServeTLS(ln, "", "")
	} else {
		go srv.Serve(ln)
	}
	t.Cleanup(func() { srv.Close() })
	return s
}

// echoServer answers each line with "echo: <line>", counting connections.
func echoServer(t *testing.T) *countingServer {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &countingServer{port: ln.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintf(c, "echo: %s\n", sc.Text())
				}
			}()
		}
	}()
	return s
}

func hello(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "hello from %s%s\n", r.Host, r.URL.Path)
}

// TestEgressAllowlistClients: curl through the proxy reaches an allowed
// name over HTTPS (CONNECT, with the test CA), over plain HTTP (absolute
// URI) and over SOCKS5 with remote DNS; a loopback service given with
// --allow-host is reached at its own address; the environment points at the
// proxy; nothing is denied.
func TestEgressAllowlistClients(t *testing.T) {
	ca := newTestCA(t, "registry.test", "files.pkg.test")
	tlsSrv := serveHTTP(t, &ca.cert, http.HandlerFunc(hello))
	plain := serveHTTP(t, nil, http.HandlerFunc(hello))
	echo := echoServer(t)
	forEachEgressConfig(t, func(t *testing.T, id identity, d *degradation, wrap []string, ws string) {
		flags := sandboxFlags("workspace-write", ws,
			"--allow-domain", "registry.test", "--allow-domain", "*.pkg.test", "--allow-domain", "127.0.0.1",
			"--resolve", "registry.test=127.0.0.1", "--resolve", "files.pkg.test=127.0.0.1",
			"--allow-host", fmt.Sprintf("127.0.0.1:%d", echo.port))
		script := fmt.Sprintf(`set -e
curl -sS --fail --max-time 60 --cacert %[1]s https://registry.test:%[2]d/tls
curl -sS --fail --max-time 60 http://files.pkg.test:%[3]d/plain
curl -sS --fail --max-time 60 -x "$ALL_PROXY" http://files.pkg.test:%[3]d/socks
exec 3<>/dev/tcp/127.0.0.1/%[4]d; echo ping >&3; read -r line <&3; echo "$line"
echo "proxy=$HTTPS_PROXY no_proxy=$no_proxy"`, ca.caFile, tlsSrv.port, plain.port, echo.port)
		r := id.run(t, runOpts{Flags: flags, Argv: bash(script), Dir: ws, Wrap: wrap, Timeout: 3 * time.Minute})
		requireExit(t, r, 0)
		for _, want := range []string{
			fmt.Sprintf("hello from registry.test:%d/tls", tlsSrv.port),
			fmt.Sprintf("hello from files.pkg.test:%d/plain", plain.port),
			fmt.Sprintf("hello from files.pkg.test:%d/socks", plain.port),
			"echo: ping",
		} {
			if !hasLine(r.Stdout, want) {
				t.Errorf("stdout lacks %q: %q", want, r.Stdout)
			}
		}
		if !strings.Contains(r.Stdout, "proxy=http://127.0.0.1:") || !strings.Contains(r.Stdout, "no_proxy=localhost,127.0.0.1,::1") {
			t.Errorf("the proxy environment is not set: %q", r.Stdout)
		}
		requireNoDenials(t, r)
		rep := requireReport(t, r)
		if !contains(rep.Enforcement.Layers, "egress-proxy") {
			t.Errorf("layers %v lack egress-proxy", rep.Enforcement.Layers)
		}
		if rep.Allowlist == nil || !contains(rep.Allowlist.Domains, "*.pkg.test") {
			t.Errorf("report allowlist = %+v, want the allowed domains", rep.Allowlist)
		}
		wantNS := !d.lacks("net-namespace")
		if got := contains(rep.Enforcement.Layers, "net-namespace"); got != wantNS {
			t.Errorf("net-namespace layer = %v, want %v (%v)", got, wantNS, rep.Enforcement.Layers)
		}
	})
}

// TestEgressAllowlistDenied: a name not in the allowlist (CONNECT, plain
// HTTP and SOCKS5), one the --deny-domain list matches, an allowed name
// that resolves to a loopback address no IP pattern allows, and raw inet
// connects (an address off the sandbox's loopback, and a host port that is
// no --allow-host) are refused: each is a denial fact with its stderr line,
// the proxy's answer names the domain and the flag, and no refused server
// saw a connection.
func TestEgressAllowlistDenied(t *testing.T) {
	ca := newTestCA(t, "registry.test", "evil.test", "bad.pkg.test")
	evil := serveHTTP(t, &ca.cert, http.HandlerFunc(hello))
	evilPlain := serveHTTP(t, nil, http.HandlerFunc(hello))
	raw := echoServer(t)
	forEachEgressConfig(t, func(t *testing.T, id identity, d *degradation, wrap []string, ws string) {
		flags := sandboxFlags("workspace-write", ws,
			"--allow-domain", "registry.test", "--allow-domain", "*.pkg.test", "--deny-domain", "bad.pkg.test",
			"--resolve", "registry.test=127.0.0.1", "--resolve", "evil.test=127.0.0.1", "--resolve", "bad.pkg.test=127.0.0.1")
		script := fmt.Sprintf(`
curl -sS --max-time 60 --cacert %[1]s https://evil.test:%[2]d/ && echo "REACHED evil over CONNECT"
curl -sS --max-time 60 http://evil.test:%[3]d/x; echo
curl -sS --max-time 60 -x "$ALL_PROXY" http://evil.test:%[3]d/socks && echo "REACHED evil over SOCKS"
curl -sS --max-time 60 http://bad.pkg.test:%[3]d/x; echo
curl -sS --max-time 60 --cacert %[1]s https://registry.test:%[2]d/ && echo "REACHED a private address"
(exec 3<>/dev/tcp/192.0.2.1/80) && echo "REACHED 192.0.2.1"
(exec 3<>/dev/tcp/127.0.0.1/%[4]d) && echo "REACHED the host port"
true`, ca.caFile, evil.port, evilPlain.port, raw.port)
		r := id.run(t, runOpts{Flags: flags, Argv: bash(script), Dir: ws, Wrap: wrap, Timeout: 3 * time.Minute})
		requireExit(t, r, 0)
		if strings.Contains(r.Stdout, "REACHED") {
			t.Errorf("a refused destination was reached: %q", r.Stdout)
		}
		for _, s := range []*countingServer{evil, evilPlain, raw} {
			if n := s.conns.Load(); n != 0 {
				t.Errorf("the refused server on port %d saw %d connections", s.port, n)
			}
		}
		body := fmt.Sprintf("dsh-sandbox: connect to evil.test:%d denied (workspace-write mode, not in the allowlist); allow it with --allow-domain evil.test", evilPlain.port)
		if !hasLine(r.Stdout, body) {
			t.Errorf("the proxy's 403 body is not %q: stdout %q", body, r.Stdout)
		}
		requireEgressDenial(t, r, fmt.Sprintf("evil.test:%d", evil.port), "proxy", "not in the allowlist")
		requireEgressDenial(t, r, fmt.Sprintf("evil.test:%d", evilPlain.port), "proxy", "not in the allowlist")
		requireEgressDenial(t, r, fmt.Sprintf("bad.pkg.test:%d", evilPlain.port), "proxy", "denied by --deny-domain")
		requireEgressDenial(t, r, fmt.Sprintf("registry.test:%d", evil.port), "proxy", "resolves to a private address 127.0.0.1")
		requireEgressDenial(t, r, "192.0.2.1:80", "connect", "")
		if d.lacks("net-namespace") {
			// Without a net namespace the host's port is one
			// connect away: the supervisor refuses it. (In a net
			// namespace 127.0.0.1 is the sandbox's own.)
			requireEgressDenial(t, r, fmt.Sprintf("127.0.0.1:%d", raw.port), "connect", "")
		}
	})
}

// requireEgressDenial asserts a connect denial of address by syscall (with
// reason, when not "") and its stderr line.
func requireEgressDenial(t *testing.T, r result, address, syscall, reason string) {
	t.Helper()
	rep := requireReport(t, r)
	for _, d := range rep.Denials {
		if d.Op != "connect" || d.Address != address || d.Syscall != syscall {
			continue
		}
		if reason != "" && d.Reason != reason {
			t.Errorf("denial %v: reason %q, want %q", d, d.Reason, reason)
		}
		line := fmt.Sprintf("%sdenied connect %s (workspace-write mode", cliPrefix, address)
		if d.Reason != "" {
			line += ", " + d.Reason
		}
		line += ")"
		if !hasDenialLine(r.Stderr, line) {
			t.Errorf("stderr lacks %q: %q", line, r.Stderr)
		}
		return
	}
	t.Errorf("no connect denial of %s by %s: %v", address, syscall, rep.Denials)
}

// TestEgressAllowlistUsage: bad allowlist flags are refused with one line
// naming the problem, and nothing runs.
func TestEgressAllowlistUsage(t *testing.T) {
	cases := []struct {
		flags []string
		want  string
	}{
		{[]string{"--allow-domain", "a.test", "--network"}, "--network allows everything"},
		{[]string{"--allow-domain", "*"}, `"*" is not a host name`},
		{[]string{"--allow-domain", "*.com"}, "whole top-level domain"},
		{[]string{"--allow-host", "example.com:80"}, "not an IP address or localhost"},
		{[]string{"--allow-host", "10.0.0.1:80"}, "not a loopback address"},
		{[]string{"--allow-host", "127.0.0.1"}, "want HOST:PORT"},
		{[]string{"--deny-domain", "a.test"}, "give --allow-domain or --allow-host too"},
		{[]string{"--allow-domain", "a.test", "--resolve", "a.test"}, "want NAME=ADDR"},
		{[]string{"--allow-domain", "a.test", "--mode", "danger-full-access"}, "need a confined mode"},
	}
	forEachIdentity(t, func(t *testing.T, id identity) {
		for _, c := range cases {
			t.Run(strings.Join(c.flags, " "), func(t *testing.T) {
				ws := id.workspace(t)
				marker := filepath.Join(ws, "ran")
				r := id.run(t, runOpts{Flags: append([]string{"--workspace", ws}, c.flags...), Argv: bash("touch " + marker), Dir: ws})
				requireSetupRefused(t, r)
				if !strings.Contains(r.Stderr, c.want) {
					t.Errorf("stderr %q lacks %q", r.Stderr, c.want)
				}
				if _, err := os.Stat(marker); err == nil {
					t.Errorf("the command ran")
				}
			})
		}
	})
}

// allowlistJSON is the report's allowlist.
type allowlistJSON struct {
	Domains []string `json:"domains"`
	Deny    []string `json:"deny"`
	Hosts   []string `json:"hosts"`
	// Upstream is the caller's proxy, without credentials.
	Upstream map[string]string `json:"upstream"`
}

// packageServer stands in for the registries: git over smart HTTP
// (git-http-backend), a PEP 503 simple index with one wheel, and an npm
// registry with one package, all on one plain-HTTP loopback server.
func packageServer(t *testing.T) *countingServer {
	t.Helper()
	root, err := os.MkdirTemp("/tmp", "dsh-it-registry-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	// A bare repository with one commit.
	src := filepath.Join(root, "src")
	repo := filepath.Join(root, "demo.git")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", src},
		{"-C", src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "egress demo"},
		{"clone", "-q", "--bare", src, repo},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	gitHandler := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	wheel := demoWheel(t)
	tgz := demoTarball(t)
	mux := http.NewServeMux()
	mux.Handle("/git/", http.StripPrefix("/git", gitHandler))
	mux.HandleFunc("/simple/dshdemo/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/dshdemo-1.0-py3-none-any.whl#sha256=%x">dshdemo-1.0-py3-none-any.whl</a></body></html>`, sha256.Sum256(wheel))
	})
	mux.HandleFunc("/files/dshdemo-1.0-py3-none-any.whl", func(w http.ResponseWriter, r *http.Request) { w.Write(wheel) })
	var srv *countingServer
	mux.HandleFunc("/dshdemo", func(w http.ResponseWriter, r *http.Request) {
		sum := sha512.Sum512(tgz)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"name":"dshdemo","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{"name":"dshdemo","version":"1.0.0",`+
			`"dist":{"tarball":"http://npm.test:%d/dshdemo/-/dshdemo-1.0.0.tgz","shasum":"%x","integrity":"sha512-%s"}}}}`,
			srv.port, sha1.Sum(tgz), base64.StdEncoding.EncodeToString(sum[:]))
	})
	mux.HandleFunc("/dshdemo/-/dshdemo-1.0.0.tgz", func(w http.ResponseWriter, r *http.Request) { w.Write(tgz) })
	srv = serveHTTP(t, nil, mux)
	return srv
}

// demoWheel is a minimal pure-Python wheel, dshdemo 1.0.
func demoWheel(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	files := []struct{ name, body string }{
		{"dshdemo/__init__.py", "VERSION = '1.0'\n"},
		{"dshdemo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: dshdemo\nVersion: 1.0\n"},
		{"dshdemo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: dsh-sandbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		w, err := z.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, f.body)
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString("dshdemo-1.0.dist-info/RECORD,,\n")
	w, err := z.Create("dshdemo-1.0.dist-info/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, record.String())
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// demoTarball is an npm package tarball, dshdemo 1.0.0.
func demoTarball(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{
		{"package/package.json", `{"name":"dshdemo","version":"1.0.0","main":"index.js"}`},
		{"package/index.js", "module.exports = 'dshdemo 1.0.0';\n"},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, f.body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestEgressAllowlistPackageClients: git (smart HTTP), pip (download from
// a simple index) and npm (install from a registry) work unchanged through
// the proxy, by name, in the workspace; each name is allowed by its own
// pattern, and nothing is denied.
func TestEgressAllowlistPackageClients(t *testing.T) {
	srv := packageServer(t)
	forEachEgressConfig(t, func(t *testing.T, id identity, d *degradation, wrap []string, ws string) {
		flags := sandboxFlags("workspace-write", ws, "--allow-domain", "127.0.0.1")
		for _, n := range []string{"git.test", "pypi.test", "npm.test"} {
			flags = append(flags, "--allow-domain", n, "--resolve", n+"=127.0.0.1")
		}
		// (git's reflog ident would look up the host's own name, which
		// the sandbox cannot resolve where /etc/hosts lacks it.)
		script := fmt.Sprintf(`set -e
cd %[1]s
export GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t.test
git clone -q http://git.test:%[2]d/git/demo.git demo && git -C demo log --format='git: %%s'
python3 -m pip download -q --no-cache-dir --disable-pip-version-check --no-deps --trusted-host pypi.test \
  --index-url http://pypi.test:%[2]d/simple/ -d dl dshdemo && ls dl | sed 's/^/pip: /'
npm install --no-audit --no-fund --no-update-notifier --loglevel=error --cache %[1]s/.npm-cache \
  --registry http://npm.test:%[2]d/ dshdemo >/dev/null && node -e 'console.log("npm: " + require("dshdemo"))'`, ws, srv.port)
		r := id.run(t, runOpts{Flags: flags, Argv: bash(script), Dir: ws, Wrap: wrap, Timeout: 5 * time.Minute})
		requireExit(t, r, 0)
		for _, want := range []string{"git: egress demo", "pip: dshdemo-1.0-py3-none-any.whl", "npm: dshdemo 1.0.0"} {
			if !hasLine(r.Stdout, want) {
				t.Errorf("stdout lacks %q: %q", want, r.Stdout)
			}
		}
		requireNoDenials(t, r)
	})
}

// TestEgressProxyNotARelay: the proxy's listener on the host's loopback
// serves only the connections the supervisor made for a sandboxed command:
// a host process that connects to it while a command runs is closed
// without an answer, and the destination it asked for sees nothing.
func TestEgressProxyNotARelay(t *testing.T) {
	target := serveHTTP(t, nil, http.HandlerFunc(hello))
	forEachEgressConfig(t, func(t *testing.T, id identity, d *degradation, wrap []string, ws string) {
		flags := sandboxFlags("workspace-write", ws, "--allow-domain", "ok.test", "--allow-domain", "127.0.0.1", "--resolve", "ok.test=127.0.0.1")
		s := id.start(t, runOpts{Flags: flags, Wrap: wrap, Dir: ws,
			Argv: bash(`echo "proxy $HTTP_PROXY"; read -r _ <&0 || sleep ` + sleepArg(20*time.Second))})
		r := s
		if err := waitOutput(r, "proxy http://", testtime.Scale(time.Minute)); err != nil {
			s.cmd.Process.Kill()
			t.Fatalf("the command did not start: %v", err)
		}
		out, _ := os.ReadFile(s.outF.Name())
		addr := strings.TrimPrefix(strings.TrimSpace(string(out)), "proxy http://")
		c, err := net.Dial("tcp", addr)
		if err == nil {
			fmt.Fprintf(c, "GET http://ok.test:%d/ HTTP/1.1\r\nHost: ok.test\r\n\r\n", target.port)
			c.SetReadDeadline(time.Now().Add(testtime.Scale(10 * time.Second)))
			n, rerr := c.Read(make([]byte, 64))
			c.Close()
			if n > 0 {
				t.Errorf("the proxy answered a host process (%d bytes)", n)
			}
			var ne net.Error
			if errors.As(rerr, &ne) && ne.Timeout() {
				t.Errorf("the proxy kept a host process's connection open")
			}
		}
		s.cmd.Process.Signal(syscall.SIGTERM)
		s.wait(t, testtime.Scale(time.Minute))
		if n := target.conns.Load(); n != 0 {
			t.Errorf("the destination saw %d connections", n)
		}
	})
}

// TestExecutorAllowlist: an Executor's commands share its egress proxy
// (one port), each command's refusals are its own facts, and the result
// carries them.
func TestExecutorAllowlist(t *testing.T) {
	requireLandlock(t)
	srv := serveHTTP(t, nil, http.HandlerFunc(hello))
	e := newTestExecutor(t, executor.Config{Mode: modes.WorkspaceWrite, Allowlist: &modes.Allowlist{
		Domains: []string{"ok.test", "127.0.0.1"},
		Resolve: map[string][]netip.Addr{"ok.test": {netip.MustParseAddr("127.0.0.1")}, "no.test": {netip.MustParseAddr("127.0.0.1")}},
	}})
	run := func(cmd string) *executor.RunResult {
		t.Helper()
		r, err := e.Run(context.Background(), executor.Request{Command: cmd})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := run(fmt.Sprintf(`echo "$HTTP_PROXY"; curl -sS --max-time 60 http://ok.test:%d/a`, srv.port))
	b := run(fmt.Sprintf(`echo "$HTTP_PROXY"; curl -sS --max-time 60 http://no.test:%d/b`, srv.port))
	pa, pb := strings.SplitN(a.Stdout.Text, "\n", 2)[0], strings.SplitN(b.Stdout.Text, "\n", 2)[0]
	if pa == "" || pa != pb {
		t.Errorf("the commands did not share one proxy: %q, %q", pa, pb)
	}
	if !strings.Contains(a.Stdout.Text, fmt.Sprintf("hello from ok.test:%d/a", srv.port)) || a.Sandbox.Denied {
		t.Errorf("allowed command: %+v", a)
	}
	if !b.Sandbox.Denied || len(b.Sandbox.Denials) != 1 || b.Sandbox.Denials[0].Address != fmt.Sprintf("no.test:%d", srv.port) ||
		b.Sandbox.Denials[0].Syscall != sandbox.SyscallProxy {
		t.Errorf("refused command's facts: %+v", b.Sandbox.Denials)
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("the server saw %d connections, want 1 (the allowed command's)", n)
	}
	// A request's own network policy replaces the executor's.
	off, err := e.Run(context.Background(), executor.Request{Network: &executor.Network{},
		Command: fmt.Sprintf(`echo "[$HTTP_PROXY]"; curl -sS --max-time 60 http://127.0.0.1:%d/off`, srv.port)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(off.Stdout.Text, "[]") || off.ExitCode == 0 || !off.Sandbox.Denied {
		t.Errorf("with the network off: %+v", off)
	}
	other, err := e.Run(context.Background(), executor.Request{Network: &executor.Network{Allowlist: &modes.Allowlist{
		Domains: []string{"no.test", "127.0.0.1"}, Resolve: map[string][]netip.Addr{"no.test": {netip.MustParseAddr("127.0.0.1")}}}},
		Command: fmt.Sprintf(`curl -sS --max-time 60 http://no.test:%d/other`, srv.port)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(other.Stdout.Text, "hello from no.test") || other.Sandbox.Denied {
		t.Errorf("with the request's allowlist: %+v", other)
	}
	if n := srv.conns.Load(); n != 2 {
		t.Errorf("the server saw %d connections, want 2", n)
	}
}

// TestEgressProbe: the probe says how an allowlist is held on each host, and
// a host without seccomp user notification refuses one with exit 125 and
// one line, running nothing.
func TestEgressProbe(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id identity) {
		abi := requireLandlock(t)
		supervisor := "supervisor"
		if abi < 4 {
			supervisor = "supervisor-only"
		}
		for _, d := range hostsOnce(nil, &degradedNoUserNS, &degradedDocker) {
			// A net namespace, else the supervisor's connect check; no
			// allowlist without user notification or pidfd_getfd.
			c := struct {
				d    *degradation
				want string
			}{d, "net-namespace"}
			switch {
			case d.lacks("seccomp-notify") || slices.Contains(hostFilters[d], "pidfd_getfd"):
				c.want = "unavailable"
			case d.lacks("net-namespace"):
				c.want = supervisor
			}
			t.Run(configName(c.d), func(t *testing.T) {
				wrap := c.d.prepare(t, id)
				r := id.run(t, runOpts{Wrap: wrap, Flags: []string{"--probe", "--json"}, NoReport: true, Dir: id.workspace(t)})
				requireExit(t, r, 0)
				if p := parseProbe(t, r); p.Allowlist != c.want {
					t.Errorf("probe allowlist = %q, want %q", p.Allowlist, c.want)
				}
				if c.want != "unavailable" {
					return
				}
				ws := id.workspace(t)
				r = id.run(t, runOpts{Wrap: wrap, Flags: sandboxFlags("workspace-write", ws, "--allow-domain", "a.test"), Argv: bash("touch ran"), Dir: ws})
				requireSetupRefused(t, r)
				if !strings.Contains(r.Stderr, "a network allowlist needs seccomp user notification") {
					t.Errorf("stderr %q does not say why", r.Stderr)
				}
				if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
					t.Errorf("the command ran")
				}
			})
		}
	})
}

// TestEgressStubResolver: in a net namespace of the command's own, the
// nameservers of resolv.conf answer from the sandbox's stub resolver: an
// allowed name resolves (to what the proxy would dial), a name not in the
// allowlist and an allowed name whose only address is private do not, each
// with a resolve fact. Without a net namespace there is no stub: a lookup
// fails, and its query is a refused connect or send.
func TestEgressStubResolver(t *testing.T) {
	forEachEgressConfig(t, func(t *testing.T, id identity, d *degradation, wrap []string, ws string) {
		flags := sandboxFlags("workspace-write", ws, "--allow-domain", "registry.test", "--allow-domain", "private.test",
			"--allow-domain", "192.0.2.0/24", "--resolve", "registry.test=192.0.2.10", "--resolve", "private.test=10.1.2.3")
		script := `for n in registry.test evil.test private.test; do
  if out=$(getent ahostsv4 "$n"); then echo "$n $(echo "$out" | awk 'NR==1 {print $1}')"; else echo "$n unresolved"; fi
done`
		r := id.run(t, runOpts{Flags: flags, Argv: bash(script), Dir: ws, Wrap: wrap, Timeout: 3 * time.Minute})
		requireExit(t, r, 0)
		rep := requireReport(t, r)
		if !d.lacks("net-namespace") {
			for _, want := range []string{"registry.test 192.0.2.10", "evil.test unresolved", "private.test unresolved"} {
				if !hasLine(r.Stdout, want) {
					t.Errorf("stdout lacks %q: %q", want, r.Stdout)
				}
			}
			found := map[string]string{}
			for _, d := range rep.Denials {
				if d.Op == "resolve" && d.Syscall == "dns" {
					found[d.Address] = d.Reason
				}
			}
			if found["evil.test"] != "not in the allowlist" || found["private.test"] != "resolves to a private address 10.1.2.3" {
				t.Errorf("resolve facts = %v, want evil.test not in the allowlist and private.test private", found)
			}
			if line := cliPrefix + "denied resolve evil.test (workspace-write mode, not in the allowlist)"; !hasDenialLine(r.Stderr, line) {
				t.Errorf("stderr lacks %q: %q", line, r.Stderr)
			}
			return
		}
		for _, want := range []string{"registry.test unresolved", "evil.test unresolved"} {
			if !hasLine(r.Stdout, want) {
				t.Errorf("stdout lacks %q: %q", want, r.Stdout)
			}
		}
		refused := false
		for _, d := range rep.Denials {
			refused = refused || (d.Op == "connect" || d.Op == "send") && strings.HasSuffix(d.Address, ":53")
		}
		if !refused {
			t.Errorf("no refused DNS query among %v", rep.Denials)
		}
	})
}
