//go:build linux

package integration

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// upstreamProxy stands in for a caller's corporate proxy on loopback: it
// answers CONNECT only with the right Basic credentials, connects the
// names it knows (here the only DNS of the test names) to loopback, and
// records every CONNECT target it was asked for.
type upstreamProxy struct {
	port  int
	auth  string
	names map[string]string
	mu    sync.Mutex
	asked []string
}

func newUpstreamProxy(t *testing.T, auth string, names map[string]string) *upstreamProxy {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	u := &upstreamProxy{port: ln.Addr().(*net.TCPAddr).Port, auth: auth, names: names}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go u.serve(c)
		}
	}()
	return u
}

func (u *upstreamProxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	u.mu.Lock()
	u.asked = append(u.asked, req.Method+" "+req.Host)
	u.mu.Unlock()
	if req.Header.Get("Proxy-Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte(u.auth)) {
		io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
		return
	}
	host, port, _ := net.SplitHostPort(req.Host)
	addr, ok := u.names[host]
	if req.Method != http.MethodConnect || !ok {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	d, err := net.DialTimeout("tcp", net.JoinHostPort(addr, port), 10*time.Second)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer d.Close()
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	go func() {
		// Pass the client's half-close on, as real proxies do.
		io.Copy(d, br)
		d.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(c, d)
}

func (u *upstreamProxy) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.asked...)
}

// TestEgressUpstreamProxy: with the caller's HTTPS_PROXY and HTTP_PROXY
// naming a proxy with a password, the egress proxy reaches an allowed name
// through it (CONNECT to the name, with the credentials; the name resolves
// nowhere but at the upstream), plain HTTP too; the password is nowhere
// the command can see (its environment, any /proc it can read); a name
// not in the allowlist is refused before the upstream sees anything; a
// wrong password is a denial fact saying the upstream refused (407); the
// report names the upstream without the credentials.
func TestEgressUpstreamProxy(t *testing.T) {
	const secret = "s3cretUpstreamPw"
	ca := newTestCA(t, "corp.test", "evil.test")
	tlsSrv := serveHTTP(t, &ca.cert, http.HandlerFunc(hello))
	plain := serveHTTP(t, nil, http.HandlerFunc(hello))
	forEachEgressConfig(t, func(t *testing.T, id identity, d *degradation, wrap []string, ws string) {
		up := newUpstreamProxy(t, "user:"+secret, map[string]string{"corp.test": "127.0.0.1", "evil.test": "127.0.0.1"})
		upURL := fmt.Sprintf("http://user:%s@127.0.0.1:%d", secret, up.port)
		flags := sandboxFlags("workspace-write", ws, "--allow-domain", "corp.test")
		script := fmt.Sprintf(`
curl -sS --fail --max-time 60 --cacert %[1]s https://corp.test:%[2]d/up
curl -sS --fail --max-time 60 http://corp.test:%[3]d/plain
curl -sS --max-time 60 --cacert %[1]s https://evil.test:%[2]d/ && echo "REACHED evil"
# The password, never whole on a command line (grep's own would hold it).
printf '%%s\n' %[4]s > pattern
env | grep -qFf pattern && echo "LEAK env"
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do grep -qaFf pattern "$f" 2>/dev/null && echo "LEAK $f"; done
env | grep -i _proxy=
true`, ca.caFile, tlsSrv.port, plain.port, `"s3cretUp""streamPw"`)
		r := id.run(t, runOpts{Flags: flags, Argv: bash(script), Dir: ws, Wrap: wrap, Timeout: 3 * time.Minute,
			Env: []string{"HTTPS_PROXY=" + upURL, "http_proxy=" + upURL, "NO_PROXY=localhost"}})
		requireExit(t, r, 0)
		for _, want := range []string{
			fmt.Sprintf("hello from corp.test:%d/up", tlsSrv.port),
			fmt.Sprintf("hello from corp.test:%d/plain", plain.port),
		} {
			if !hasLine(r.Stdout, want) {
				t.Errorf("stdout lacks %q: %q", want, r.Stdout)
			}
		}
		if strings.Contains(r.Stdout, "REACHED") || strings.Contains(r.Stdout, "LEAK") || strings.Contains(r.Stdout, secret) {
			t.Errorf("a refused name was reached or the upstream's password is visible inside: %q", r.Stdout)
		}
		want := []string{fmt.Sprintf("CONNECT corp.test:%d", tlsSrv.port), fmt.Sprintf("CONNECT corp.test:%d", plain.port)}
		if got := up.seen(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("the upstream was asked %q, want %q (never evil.test)", got, want)
		}
		requireEgressDenial(t, r, fmt.Sprintf("evil.test:%d", tlsSrv.port), "proxy", "not in the allowlist")
		rep := requireReport(t, r)
		if rep.Allowlist == nil || rep.Allowlist.Upstream["https"] != fmt.Sprintf("http://127.0.0.1:%d", up.port) {
			t.Errorf("report allowlist = %+v, want the upstream without credentials", rep.Allowlist)
		}
		if strings.Contains(r.ReportRaw, secret) {
			t.Errorf("the report holds the upstream's password")
		}

		// A wrong password: the upstream's 407 is the command's error
		// and a denial fact saying the upstream refused.
		bad := fmt.Sprintf("http://user:wrong@127.0.0.1:%d", up.port)
		r = id.run(t, runOpts{Flags: flags, Argv: bash(fmt.Sprintf(`curl -sS --max-time 60 --cacert %s https://corp.test:%d/ && echo REACHED; true`, ca.caFile, tlsSrv.port)),
			Dir: ws, Wrap: wrap, Timeout: 3 * time.Minute, Env: []string{"HTTPS_PROXY=" + bad}})
		requireExit(t, r, 0)
		if strings.Contains(r.Stdout, "REACHED") {
			t.Errorf("reached through a refusing upstream: %q", r.Stdout)
		}
		requireEgressDenial(t, r, fmt.Sprintf("corp.test:%d", tlsSrv.port), "proxy",
			fmt.Sprintf("upstream proxy 127.0.0.1:%d refused (407 Proxy Authentication Required)", up.port))
	})
}
