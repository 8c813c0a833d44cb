package egress

import (
	"bufio"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testUpstream is a CONNECT proxy on loopback that records what it was
// asked, optionally requires Basic credentials, and connects a name of
// names to its address (other hosts it dials as they are).
type testUpstream struct {
	ln    net.Listener
	auth  string // "user:pass", or "" for none
	names map[string]string
	mu    sync.Mutex
	asked []upstreamAsk
}

type upstreamAsk struct{ target, auth string }

func newTestUpstream(t *testing.T, auth string, names map[string]string) *testUpstream {
	t.Helper()
	u := &testUpstream{ln: listen(t), auth: auth, names: names}
	go func() {
		for {
			c, err := u.ln.Accept()
			if err != nil {
				return
			}
			go u.serve(c)
		}
	}()
	t.Cleanup(func() { u.ln.Close() })
	return u
}

func (u *testUpstream) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	u.mu.Lock()
	u.asked = append(u.asked, upstreamAsk{target: req.Host, auth: req.Header.Get("Proxy-Authorization")})
	u.mu.Unlock()
	if req.Method != http.MethodConnect {
		io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
		return
	}
	if u.auth != "" && req.Header.Get("Proxy-Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte(u.auth)) {
		io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"t\"\r\nContent-Length: 0\r\n\r\n")
		return
	}
	host, port, _ := net.SplitHostPort(req.Host)
	addr := req.Host
	if a, ok := u.names[host]; ok {
		addr = net.JoinHostPort(a, port)
	}
	d, err := net.DialTimeout("tcp", addr, 5*time.Second)
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

func (u *testUpstream) seen() []upstreamAsk {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]upstreamAsk(nil), u.asked...)
}

func (u *testUpstream) url(userinfo *url.Userinfo) *url.URL {
	return &url.URL{Scheme: "http", User: userinfo, Host: u.ln.Addr().String()}
}

func newUpstreamEnv(t *testing.T, pol Policy, up *Upstream) *env {
	t.Helper()
	e := &env{t: t, dials: &dialRecorder{}}
	e.p = New(Config{Resolve: resolveHook, Dial: e.dials.dial, DialTimeout: 5 * time.Second})
	e.ln = &countingListener{Listener: listen(t)}
	e.sv = e.p.Serve(e.ln, Session{Policy: pol, Upstream: up, OnDeny: func(d Denial) {
		e.mu.Lock()
		e.denied = append(e.denied, d)
		e.mu.Unlock()
	}})
	t.Cleanup(func() { e.p.Close() })
	return e
}

func TestUpstreamConnect(t *testing.T) {
	echo := echoServer(t)
	ep := strconv.Itoa(port(t, echo.Addr()))
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:s3cret"))
	pol := policy([]string{"far.test", "near.test", "private.test", "allowed.test", "127.0.0.1"}, nil, "127.0.0.1")
	tests := []struct {
		name    string
		auth    string        // what the upstream requires
		user    *url.Userinfo // what the upstream URL carries
		noProxy string
		dest    string
		status  int
		asked   []upstreamAsk // what the upstream saw
		direct  bool          // the proxy dialed the destination itself
		reason  string        // the Denial's reason, "" for none
	}{
		{name: "through the upstream, with auth", auth: "user:s3cret", user: url.UserPassword("user", "s3cret"),
			dest: "far.test:" + ep, status: 200, asked: []upstreamAsk{{"far.test:" + ep, basic}}},
		{name: "no auth", dest: "far.test:" + ep, status: 200, asked: []upstreamAsk{{"far.test:" + ep, ""}}},
		{name: "NO_PROXY suffix: direct", noProxy: "example.com, .test", dest: "allowed.test:" + ep, status: 200, direct: true},
		{name: "NO_PROXY port mismatch: upstream", noProxy: "far.test:1", dest: "far.test:" + ep, status: 200, asked: []upstreamAsk{{"far.test:" + ep, ""}}},
		{name: "NO_PROXY CIDR: direct", noProxy: "127.0.0.0/8", dest: "127.0.0.1:" + ep, status: 200, direct: true},
		{name: "NO_PROXY star: direct", noProxy: "*", dest: "allowed.test:" + ep, status: 200, direct: true},
		{name: "not allowed: the upstream sees nothing", dest: "blocked.test:" + ep, status: 403, reason: "not in the allowlist"},
		{name: "allowed name resolving to a private address: refused", dest: "private.test:" + ep, status: 403, reason: "private address 10.0.0.1"},
		{name: "upstream 407", auth: "user:s3cret", user: url.UserPassword("user", "wrong"), dest: "far.test:" + ep, status: 502,
			asked: []upstreamAsk{{"far.test:" + ep, "Basic " + base64.StdEncoding.EncodeToString([]byte("user:wrong"))}}, reason: "refused (407 Proxy Authentication Required)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := newTestUpstream(t, tc.auth, map[string]string{"far.test": "127.0.0.1"})
			e := newUpstreamEnv(t, pol, &Upstream{HTTPS: up.url(tc.user), NoProxy: tc.noProxy})
			resp, c, br := e.connect(tc.dest)
			defer c.Close()
			require.Equal(t, tc.status, resp.StatusCode)
			if tc.status == 200 {
				fmt.Fprint(c, "ping\n")
				line, err := br.ReadString('\n')
				require.NoError(t, err)
				assert.Equal(t, "ping\n", line)
			}
			assert.Equal(t, tc.asked, up.seen())
			if tc.direct {
				assert.Equal(t, []string{"127.0.0.1:" + ep}, e.dials.dialed())
			} else if tc.status == 200 {
				assert.Equal(t, []string{up.ln.Addr().String()}, e.dials.dialed(), "only the upstream is dialed")
			}
			if tc.reason == "" {
				assert.Empty(t, e.denials())
				return
			}
			d := e.denials()
			require.Len(t, d, 1)
			assert.Contains(t, d[0].Reason, tc.reason)
		})
	}
}

// A plain-HTTP request goes through the upstream's CONNECT too, to the
// name the command asked for, under HTTP_PROXY (not HTTPS_PROXY).
func TestUpstreamPlainHTTP(t *testing.T) {
	web := listen(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "plain %s %s", r.Host, r.URL.Path)
	})}
	go srv.Serve(web)
	defer srv.Close()
	wp := strconv.Itoa(port(t, web.Addr()))
	up := newTestUpstream(t, "", map[string]string{"far.test": "127.0.0.1"})
	e := newUpstreamEnv(t, policy([]string{"far.test"}, nil), &Upstream{HTTP: up.url(nil)})
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr()})}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://far.test:" + wp + "/x")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "plain far.test:"+wp+" /x", string(body))
	assert.Equal(t, []upstreamAsk{{"far.test:" + wp, ""}}, up.seen())

	// HTTPS_PROXY alone does not cover plain HTTP: that one is direct
	// (and far.test does not resolve here).
	e2 := newUpstreamEnv(t, policy([]string{"far.test"}, nil), &Upstream{HTTPS: up.url(nil)})
	tr2 := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: e2.addr()})}
	defer tr2.CloseIdleConnections()
	resp, err = (&http.Client{Transport: tr2}).Get("http://far.test:" + wp + "/x")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 502, resp.StatusCode)
	assert.Len(t, up.seen(), 1)
}

func TestNoProxy(t *testing.T) {
	tests := []struct {
		np   string
		dest string
		want bool
	}{
		{"", "a.example.com:443", false},
		{"example.com", "example.com:443", true},
		{"example.com", "a.example.com:443", true},
		{"example.com", "badexample.com:443", false},
		{".example.com", "a.example.com:443", true},
		{".example.com", "example.com:443", true},
		{"*.example.com", "a.example.com:443", true},
		{"*", "anything:1", true},
		{"example.com:80", "example.com:443", false},
		{"example.com:443", "example.com:443", true},
		{"10.0.0.0/8", "10.1.2.3:443", true},
		{"10.0.0.0/8", "11.1.2.3:443", false},
		{"192.168.1.1", "192.168.1.1:80", true},
		{"[::1]:80", "[::1]:80", true},
		{"::1", "[::1]:80", true},
		{" foo.org , EXAMPLE.com ", "x.example.com:443", true},
		{"10.0.0.0/8", "ten.example:443", false},
	}
	for _, tc := range tests {
		tg, err := parseAuthority(tc.dest, 0)
		require.NoError(t, err)
		assert.Equal(t, tc.want, noProxy(tc.np, tg), "NO_PROXY=%q %s", tc.np, tc.dest)
	}
}

// An https:// upstream: the CONNECT goes inside TLS to the proxy, whose
// certificate is verified.
func TestUpstreamHTTPSProxy(t *testing.T) {
	echo := echoServer(t)
	ep := strconv.Itoa(port(t, echo.Addr()))
	var mu sync.Mutex
	var asked []string
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.Host+" "+r.Header.Get("Proxy-Authorization"))
		mu.Unlock()
		host, p, _ := net.SplitHostPort(r.Host)
		if r.Method != http.MethodConnect || host != "far.test" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		d, err := net.Dial("tcp", "127.0.0.1:"+p)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer d.Close()
		w.WriteHeader(http.StatusOK)
		c, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		go io.Copy(d, brw)
		io.Copy(c, d)
	}))
	defer ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	// httptest's certificate is for example.com and 127.0.0.1.
	upURL := &url.URL{Scheme: "https", User: url.UserPassword("u", "p"), Host: ts.Listener.Addr().String()}
	for _, tc := range []struct {
		name  string
		roots *x509.CertPool
		ok    bool
	}{{"trusted", pool, true}, {"untrusted certificate", nil, false}} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			asked = nil
			mu.Unlock()
			e := newUpstreamEnv(t, policy([]string{"far.test"}, nil), &Upstream{HTTPS: upURL, RootCAs: tc.roots})
			resp, c, br := e.connect("far.test:" + ep)
			defer c.Close()
			mu.Lock()
			got := append([]string(nil), asked...)
			mu.Unlock()
			if !tc.ok {
				assert.Equal(t, 502, resp.StatusCode)
				assert.Empty(t, got, "no CONNECT without a verified proxy")
				return
			}
			require.Equal(t, 200, resp.StatusCode)
			fmt.Fprint(c, "ping\n")
			line, err := br.ReadString('\n')
			require.NoError(t, err)
			assert.Equal(t, "ping\n", line)
			assert.Equal(t, []string{"CONNECT far.test:" + ep + " Basic " + base64.StdEncoding.EncodeToString([]byte("u:p"))}, got)
		})
	}
}

// SOCKS5 tunnels go through HTTPS_PROXY as CONNECT tunnels do; a refused
// one never reaches the upstream, an upstream's refusal is reply 1 and a
// Denial saying so.
func TestUpstreamSOCKS5(t *testing.T) {
	echo := echoServer(t)
	p := port(t, echo.Addr())
	ep := strconv.Itoa(p)
	for _, tc := range []struct {
		name   string
		auth   string
		dest   string
		code   byte
		asked  []upstreamAsk
		reason string
	}{
		{"allowed", "", "far.test", 0, []upstreamAsk{{"far.test:" + ep, ""}}, ""},
		{"refused", "", "denied.test", 2, nil, "not in the allowlist"},
		{"upstream 407", "u:p", "far.test", 1, []upstreamAsk{{"far.test:" + ep, ""}}, "refused (407 Proxy Authentication Required)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newTestUpstream(t, tc.auth, map[string]string{"far.test": "127.0.0.1"})
			e := newUpstreamEnv(t, policy([]string{"far.test"}, nil), &Upstream{HTTPS: up.url(nil)})
			reply, c := socksDial(t, e.addr(), []byte{0}, 1, domain(tc.dest), p)
			defer c.Close()
			require.Equal(t, tc.code, reply[1])
			if tc.code == 0 {
				fmt.Fprint(c, "ping\n")
				line, err := bufio.NewReader(c).ReadString('\n')
				require.NoError(t, err)
				assert.Equal(t, "ping\n", line)
			}
			assert.Equal(t, tc.asked, up.seen())
			d := e.denials()
			if tc.reason == "" {
				assert.Empty(t, d)
				return
			}
			require.Len(t, d, 1)
			assert.Contains(t, d[0].Reason, tc.reason)
		})
	}
}
