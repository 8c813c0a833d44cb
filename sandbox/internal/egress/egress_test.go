package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakePolicy allows the names in allow unless they are in deny, and the
// addresses in ips explicitly.
type fakePolicy struct {
	allow map[string]bool
	deny  map[string]bool
	ips   map[netip.Addr]bool
}

func (p fakePolicy) AllowsName(host string) (bool, string) {
	if p.deny[host] {
		return false, "denied by --deny-domain"
	}
	if p.allow[host] {
		return true, ""
	}
	return false, "not in the allowlist"
}

func (p fakePolicy) AllowsIP(ip netip.Addr) bool { return p.ips[ip] }

func policy(names []string, deny []string, ips ...string) fakePolicy {
	p := fakePolicy{allow: map[string]bool{}, deny: map[string]bool{}, ips: map[netip.Addr]bool{}}
	for _, n := range names {
		p.allow[n] = true
	}
	for _, n := range deny {
		p.deny[n] = true
	}
	for _, ip := range ips {
		p.ips[netip.MustParseAddr(ip)] = true
	}
	return p
}

var loopback = netip.MustParseAddr("127.0.0.1")

// testNames is the Resolve hook's DNS.
var testNames = map[string][]netip.Addr{
	"allowed.test": {loopback},
	"blocked.test": {loopback},
	"denied.test":  {loopback},
	"private.test": {netip.MustParseAddr("10.0.0.1")},
	"meta.test":    {netip.MustParseAddr("169.254.169.254")},
	"both.test":    {netip.MustParseAddr("10.0.0.1"), loopback},
}

func resolveHook(_ context.Context, host string) ([]netip.Addr, error) {
	if ips, ok := testNames[host]; ok {
		return ips, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

// dialRecorder is a Dial hook that records every address dialed.
type dialRecorder struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialRecorder) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

func (d *dialRecorder) dialed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

// countingListener counts the connections it accepted.
type countingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return l
}

// env is a Proxy serving one session on a loopback listener.
type env struct {
	t      testing.TB
	p      *Proxy
	sv     *Served
	ln     *countingListener
	dials  *dialRecorder
	mu     sync.Mutex
	denied []Denial
}

func newEnv(t testing.TB, pol Policy, mode string) *env {
	t.Helper()
	e := &env{t: t, dials: &dialRecorder{}}
	e.p = New(Config{Resolve: resolveHook, Dial: e.dials.dial, DialTimeout: 5 * time.Second})
	e.ln = &countingListener{Listener: listen(t)}
	e.sv = e.p.Serve(e.ln, Session{Policy: pol, Mode: mode, OnDeny: func(d Denial) {
		e.mu.Lock()
		e.denied = append(e.denied, d)
		e.mu.Unlock()
	}})
	t.Cleanup(func() { e.p.Close() })
	return e
}

func (e *env) addr() string { return e.ln.Addr().String() }

func (e *env) denials() []Denial {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Denial(nil), e.denied...)
}

// connect opens a CONNECT tunnel to dest and returns the response and the
// connection (reading through br).
func (e *env) connect(dest string) (*http.Response, net.Conn, *bufio.Reader) {
	e.t.Helper()
	c, err := net.Dial("tcp", e.addr())
	require.NoError(e.t, err)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	require.NoError(e.t, err)
	return resp, c, br
}

// echoServer echoes every connection and counts them.
func echoServer(t testing.TB) *countingListener {
	t.Helper()
	l := &countingListener{Listener: listen(t)}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return l
}

func port(t testing.TB, a net.Addr) int {
	t.Helper()
	return a.(*net.TCPAddr).Port
}

// settle waits for the goroutine count to come back to base.
func settle(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d, were %d\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConnectTLS(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello over TLS %s", r.URL.Path)
	}))
	defer ts.Close()
	e := newEnv(t, policy([]string{"allowed.test"}, nil, "127.0.0.1"), "")
	tr := ts.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr()})
	tr.TLSClientConfig.ServerName = "example.com" // in httptest's certificate
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	_, p, _ := net.SplitHostPort(ts.Listener.Addr().String())
	for _, path := range []string{"/one", "/two"} {
		resp, err := client.Get("https://allowed.test:" + p + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "hello over TLS "+path, string(body))
	}
	assert.Equal(t, int32(1), e.ln.n.Load(), "one tunnel for both requests")
	assert.Equal(t, []string{"127.0.0.1:" + p}, e.dials.dialed())
	assert.Empty(t, e.denials())
}

func TestPlainHTTPKeepAlive(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s host=%s body=%s", r.Method, r.URL.Path, r.Host, body)
	}))
	defer ts.Close()
	e := newEnv(t, policy([]string{"allowed.test"}, nil, "127.0.0.1"), "")
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr()})}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	_, p, _ := net.SplitHostPort(ts.Listener.Addr().String())
	base := "http://Allowed.Test.:" + p

	req, _ := http.NewRequest("GET", base+"/a", nil)
	req.Header.Set("Proxy-Authorization", "Basic eDp5")
	req.Header.Set("Proxy-Foo", "bar")
	resp, err := client.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "GET /a host=Allowed.Test.:"+p+" body=", string(body))

	resp, err = client.Post(base+"/b", "text/plain", strings.NewReader("payload"))
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "POST /b host=Allowed.Test.:"+p+" body=payload", string(body))

	assert.Equal(t, int32(1), e.ln.n.Load(), "both requests on one proxy connection")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 2)
	assert.Empty(t, seen[0].Get("Proxy-Authorization"))
	assert.Empty(t, seen[0].Get("Proxy-Foo"))
	assert.Empty(t, seen[0].Get("X-Forwarded-For"))
	assert.Equal(t, []string{"127.0.0.1:" + p}, e.dials.dialed(), "one upstream dial (pooled)")
}

func TestOriginFormAndBadRequests(t *testing.T) {
	e := newEnv(t, policy([]string{"allowed.test"}, nil), "")
	for _, tc := range []struct{ name, req, want string }{
		{"origin-form", "GET /x HTTP/1.1\r\nHost: a\r\n\r\n", notAProxyRequest},
		{"connect without port", "CONNECT allowed.test HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "dsh-sandbox: invalid destination host: allowed.test\n"},
		{"connect empty host", "CONNECT :443 HTTP/1.1\r\nHost: :443\r\n\r\n", "dsh-sandbox: invalid destination host: :443\n"},
		{"connect port 0", "CONNECT allowed.test:0 HTTP/1.1\r\nHost: allowed.test:0\r\n\r\n", "dsh-sandbox: invalid destination port: allowed.test:0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.addr())
			require.NoError(t, err)
			defer c.Close()
			io.WriteString(c, tc.req)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			assert.Equal(t, 400, resp.StatusCode)
			assert.Equal(t, tc.want, string(body))
		})
	}
	assert.Empty(t, e.denials())
	assert.Empty(t, e.dials.dialed())
}

func TestDenied(t *testing.T) {
	target := echoServer(t)
	p := port(t, target.Addr())
	ps := fmt.Sprint(p)
	for _, tc := range []struct {
		name, mode, host, reason, via string
	}{
		{"connect not allowed", "workspace-write mode", "denied.test", "not in the allowlist", "connect"},
		{"connect deny-domain", "workspace-write mode", "blocked.test", "denied by --deny-domain", "connect"},
		{"http not allowed", "", "denied.test", "not in the allowlist", "http"},
		{"http deny-domain", "read-only mode", "blocked.test", "denied by --deny-domain", "http"},
		{"connect private", "", "private.test", "resolves to a private address 10.0.0.1", "connect"},
		{"http private", "", "private.test", "resolves to a private address 10.0.0.1", "http"},
		{"connect metadata", "", "meta.test", "resolves to a private address 169.254.169.254", "connect"},
		{"connect both without ip", "", "both.test", "resolves to a private address 10.0.0.1", "connect"},
		{"connect literal", "", "127.0.0.1", "not a public address", "connect"},
		{"http literal", "", "127.0.0.1", "not a public address", "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := target.n.Load()
			e := newEnv(t, policy([]string{"allowed.test", "blocked.test", "private.test", "meta.test", "both.test", "127.0.0.1"}, []string{"blocked.test"}), tc.mode)
			dest := tc.host + ":" + ps
			var resp *http.Response
			if tc.via == "connect" {
				var c net.Conn
				resp, c, _ = e.connect(dest)
				defer c.Close()
			} else {
				tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr()})}
				defer tr.CloseIdleConnections()
				var err error
				resp, err = (&http.Client{Transport: tr}).Get("http://" + dest + "/")
				require.NoError(t, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			why := tc.reason
			if tc.mode != "" {
				why = tc.mode + ", " + why
			}
			assert.Equal(t, 403, resp.StatusCode)
			hint := "allow it with --allow-domain " + tc.host
			switch {
			case strings.HasPrefix(tc.reason, "denied by"):
				hint = "a --deny-domain pattern matches it"
			case strings.HasPrefix(tc.reason, "resolves to"):
				hint = "allow the address with --allow-domain " + tc.reason[strings.LastIndexByte(tc.reason, ' ')+1:]
			}
			assert.Equal(t, "dsh-sandbox: connect to "+dest+" denied ("+why+"); "+hint+"\n", string(body))
			assert.Equal(t, dest, resp.Header.Get("X-Dsh-Sandbox-Denied"))
			assert.Equal(t, "text/plain", resp.Header.Get("Content-Type"))
			assert.Equal(t, []Denial{{Host: tc.host, Port: p, Reason: tc.reason, Proto: tc.via}}, e.denials())
			assert.Empty(t, e.dials.dialed(), "nothing dialed")
			assert.Equal(t, before, target.n.Load(), "the target saw no connection")
		})
	}
}

func TestMixedResolution(t *testing.T) {
	target := echoServer(t)
	p := fmt.Sprint(port(t, target.Addr()))
	e := newEnv(t, policy([]string{"both.test"}, nil, "127.0.0.1"), "")
	resp, c, br := e.connect("both.test:" + p)
	defer c.Close()
	require.Equal(t, 200, resp.StatusCode)
	io.WriteString(c, "ping")
	got := make([]byte, 4)
	_, err := io.ReadFull(br, got)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(got))
	assert.Equal(t, []string{"127.0.0.1:" + p}, e.dials.dialed(), "10.0.0.1 never dialed")
	assert.Empty(t, e.denials())
}

func TestResolveAndDialFailures(t *testing.T) {
	closed := listen(t)
	p := fmt.Sprint(port(t, closed.Addr()))
	closed.Close()
	e := newEnv(t, policy([]string{"allowed.test", "nowhere.test"}, nil, "127.0.0.1"), "")

	resp, c, _ := e.connect("nowhere.test:443")
	body, _ := io.ReadAll(resp.Body)
	c.Close()
	assert.Equal(t, 502, resp.StatusCode)
	assert.Equal(t, "dsh-sandbox: cannot resolve nowhere.test: no such host nowhere.test\n", string(body))

	resp, c, _ = e.connect("allowed.test:" + p)
	body, _ = io.ReadAll(resp.Body)
	c.Close()
	assert.Equal(t, 502, resp.StatusCode)
	assert.Contains(t, string(body), "dsh-sandbox: cannot connect to allowed.test:"+p+": ")
	assert.Contains(t, string(body), "connection refused")
	assert.Empty(t, e.denials(), "failures are not denials")
}

// socks runs a SOCKS5 handshake offering methods; it returns the reply's
// code (or the method reply when the method was refused) and the conn.
func socksDial(t *testing.T, proxy string, methods []byte, cmd byte, addr []byte, port int) ([]byte, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	require.NoError(t, err)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write(append([]byte{5, byte(len(methods))}, methods...))
	mr := make([]byte, 2)
	_, err = io.ReadFull(c, mr)
	require.NoError(t, err)
	if mr[1] != 0 {
		return mr, c
	}
	req := append([]byte{5, cmd, 0}, addr...)
	req = append(req, byte(port>>8), byte(port))
	c.Write(req)
	head := make([]byte, 4)
	_, err = io.ReadFull(c, head)
	require.NoError(t, err)
	n := 4
	if head[3] == 4 {
		n = 16
	}
	rest := make([]byte, n+2)
	_, err = io.ReadFull(c, rest)
	require.NoError(t, err)
	c.SetDeadline(time.Time{})
	return append(head, rest...), c
}

func domain(name string) []byte { return append([]byte{3, byte(len(name))}, name...) }

func TestSOCKS5(t *testing.T) {
	target := echoServer(t)
	p := port(t, target.Addr())
	closed := listen(t)
	cp := port(t, closed.Addr())
	closed.Close()
	for _, tc := range []struct {
		name    string
		methods []byte
		cmd     byte
		addr    []byte
		port    int
		code    byte
		denial  *Denial
	}{
		{"domain allowed", []byte{0}, 1, domain("Allowed.Test."), p, 0, nil},
		{"domain refused", []byte{2, 0}, 1, domain("denied.test"), p, 2, &Denial{Host: "denied.test", Port: p, Reason: "not in the allowlist", Proto: "socks5"}},
		{"domain deny-domain", []byte{0}, 1, domain("blocked.test"), p, 2, &Denial{Host: "blocked.test", Port: p, Reason: "denied by --deny-domain", Proto: "socks5"}},
		{"domain private", []byte{0}, 1, domain("private.test"), p, 2, &Denial{Host: "private.test", Port: p, Reason: "resolves to a private address 10.0.0.1", Proto: "socks5"}},
		{"ipv4 allowed", []byte{0}, 1, []byte{1, 127, 0, 0, 1}, p, 0, nil},
		{"ipv4 not public", []byte{0}, 1, []byte{1, 10, 0, 0, 1}, p, 2, &Denial{Host: "10.0.0.1", Port: p, Reason: "not a public address", Proto: "socks5"}},
		{"ipv6 mapped loopback", []byte{0}, 1, append([]byte{4}, netip.MustParseAddr("::ffff:127.0.0.1").AsSlice()...), p, 0, nil},
		{"unresolvable", []byte{0}, 1, domain("nowhere.test"), p, 4, nil},
		{"refused", []byte{0}, 1, domain("allowed.test"), cp, 5, nil},
		{"bad name", []byte{0}, 1, domain("bad name"), p, 1, nil},
		{"bind", []byte{0}, 2, domain("allowed.test"), p, 7, nil},
		{"udp associate", []byte{0}, 3, domain("allowed.test"), p, 7, nil},
		{"bad atyp", []byte{0}, 1, []byte{9}, p, 8, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, policy([]string{"allowed.test", "blocked.test", "private.test", "nowhere.test", "127.0.0.1", "10.0.0.1"}, []string{"blocked.test"}, "127.0.0.1"), "")
			reply, c := socksDial(t, e.addr(), tc.methods, tc.cmd, tc.addr, tc.port)
			defer c.Close()
			require.Equal(t, byte(5), reply[0])
			assert.Equal(t, tc.code, reply[1], "reply code")
			if tc.denial != nil {
				assert.Equal(t, []Denial{*tc.denial}, e.denials())
				assert.Empty(t, e.dials.dialed())
			} else {
				assert.Empty(t, e.denials())
			}
			if tc.code != 0 {
				return
			}
			// The bound address is the outgoing connection's.
			assert.Equal(t, byte(1), reply[3])
			assert.Equal(t, []byte{127, 0, 0, 1}, reply[4:8])
			assert.NotZero(t, int(reply[8])<<8|int(reply[9]))
			io.WriteString(c, "socks ping")
			got := make([]byte, 10)
			_, err := io.ReadFull(c, got)
			require.NoError(t, err)
			assert.Equal(t, "socks ping", string(got))
		})
	}
}

func TestSOCKS5NoAcceptableMethod(t *testing.T) {
	e := newEnv(t, policy([]string{"allowed.test"}, nil), "")
	reply, c := socksDial(t, e.addr(), []byte{1, 2}, 1, nil, 0)
	defer c.Close()
	assert.Equal(t, []byte{5, 0xff}, reply)
	_, err := c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "closed after the refusal")
}

func TestForward(t *testing.T) {
	target := echoServer(t)
	p := New(Config{})
	defer p.Close()
	l := listen(t)
	sv := p.Forward(l, target.Addr().(*net.TCPAddr).AddrPort(), Session{})
	c, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	msg := strings.Repeat("forwarded bytes ", 10000)
	go io.WriteString(c, msg)
	got := make([]byte, len(msg))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	assert.Equal(t, msg, string(got))
	c.(*net.TCPConn).CloseWrite()
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "half-close passed on and back")
	require.NoError(t, sv.Close())
}

func TestServeConn(t *testing.T) {
	target := echoServer(t)
	pt := port(t, target.Addr())
	p := New(Config{Resolve: resolveHook})
	l := listen(t)
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			p.ServeConn(c, Session{Policy: policy([]string{"allowed.test"}, nil, "127.0.0.1")})
		}
	}()
	reply, c := socksDial(t, l.Addr().String(), []byte{0}, 1, domain("allowed.test"), pt)
	defer c.Close()
	require.Equal(t, byte(0), reply[1])
	io.WriteString(c, "x")
	_, err := io.ReadFull(c, make([]byte, 1))
	require.NoError(t, err)
	done := make(chan error)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Proxy.Close blocked on a ServeConn tunnel")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF)
}

// Close ends open tunnels (CONNECT, SOCKS5, Forward, keep-alive HTTP),
// half-open handshakes and silent clients promptly, and leaks no
// goroutine.
func TestCloseEndsEverything(t *testing.T) {
	base := runtime.NumGoroutine()
	target := echoServer(t)
	pt := port(t, target.Addr())
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	e := newEnv(t, policy([]string{"allowed.test"}, nil, "127.0.0.1"), "")
	fl := listen(t)
	fwd := e.p.Forward(fl, target.Addr().(*net.TCPAddr).AddrPort(), Session{})

	var clients []net.Conn
	resp, c, _ := e.connect(fmt.Sprintf("allowed.test:%d", pt))
	require.Equal(t, 200, resp.StatusCode)
	clients = append(clients, c)
	reply, c := socksDial(t, e.addr(), []byte{0}, 1, domain("allowed.test"), pt)
	require.Equal(t, byte(0), reply[1])
	clients = append(clients, c)
	c, err := net.Dial("tcp", fl.Addr().String())
	require.NoError(t, err)
	clients = append(clients, c)
	// A silent client, a half-sent request line, a half-sent SOCKS greeting.
	for _, partial := range []string{"", "GET http://allowed.test/ HTT", "\x05\x03\x00"} {
		c, err := net.Dial("tcp", e.addr())
		require.NoError(t, err)
		io.WriteString(c, partial)
		clients = append(clients, c)
	}
	// A keep-alive plain-HTTP connection with a pooled upstream one.
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr()})}
	r2, err := (&http.Client{Transport: tr}).Get(fmt.Sprintf("http://allowed.test:%d/", port(t, hs.Listener.Addr())))
	require.NoError(t, err)
	io.ReadAll(r2.Body)
	r2.Body.Close()
	require.Equal(t, 200, r2.StatusCode)

	require.Eventually(t, func() bool { return e.sv.Conns() == 6 && fwd.Conns() == 1 }, 5*time.Second, time.Millisecond)

	start := time.Now()
	require.NoError(t, e.sv.Close())
	require.NoError(t, fwd.Close())
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Zero(t, e.sv.Conns())
	for _, c := range clients {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.ReadAll(c)
		assert.NoError(t, err, "closed by the proxy (EOF), not timed out")
		c.Close()
	}
	_, err = net.Dial("tcp", e.addr())
	assert.Error(t, err, "listener closed")
	require.NoError(t, e.p.Close())
	tr.CloseIdleConnections()
	hs.Close()
	target.Close()
	settle(t, base)
}

func TestServeAfterClose(t *testing.T) {
	p := New(Config{})
	require.NoError(t, p.Close())
	l := listen(t)
	sv := p.Serve(l, Session{Policy: policy(nil, nil)})
	_, err := net.Dial("tcp", l.Addr().String())
	assert.Error(t, err)
	assert.NoError(t, sv.Close())
}

func TestIsPublic(t *testing.T) {
	for _, tc := range []struct {
		ip     string
		public bool
	}{
		{"1.1.1.1", true}, {"93.184.216.34", true}, {"2606:4700::1111", true},
		{"::ffff:8.8.8.8", true}, {"64:ff9b::808:808", true}, {"2002:808:808::1", true},
		{"127.0.0.1", false}, {"127.255.0.1", false}, {"::1", false},
		{"10.1.2.3", false}, {"172.16.0.1", false}, {"172.31.255.255", false}, {"192.168.1.1", false},
		{"fc00::1", false}, {"fd12::1", false},
		{"169.254.169.254", false}, {"fe80::1", false},
		{"0.0.0.0", false}, {"::", false}, {"0.1.2.3", false},
		{"224.0.0.1", false}, {"ff02::1", false}, {"255.255.255.255", false}, {"240.0.0.1", false},
		{"100.64.0.1", false}, {"100.127.255.255", false}, {"192.0.0.8", false}, {"198.18.0.1", false}, {"198.19.255.255", false},
		{"::ffff:10.0.0.1", false}, {"::ffff:127.0.0.1", false}, {"::ffff:169.254.169.254", false},
		{"64:ff9b::a00:1", false}, {"64:ff9b::7f00:1", false}, {"2002:a00:1::1", false},
		{"2001:db8::1", false}, {"::127.0.0.1", false}, {"fec0::1", false},
		{"172.32.0.1", true}, {"100.128.0.1", true}, {"198.20.0.1", true},
	} {
		assert.Equal(t, tc.public, isPublic(netip.MustParseAddr(tc.ip)), tc.ip)
	}
}

func TestNormalizeHost(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Example.COM", "example.com"},
		{"example.com.", "example.com"},
		{"[2001:DB8::1]", "2001:db8::1"},
		{"::FFFF:10.0.0.1", "10.0.0.1"},
		{"127.0.0.1", "127.0.0.1"},
		{"", ""}, {".", ""}, {"a b", ""}, {"a\x00b", ""}, {"a\tb", ""}, {"fe80::1%eth0", ""},
		{strings.Repeat("a", 254), ""}, {"a:b", ""},
	} {
		got, _, err := normalizeHost(tc.in)
		if tc.want == "" {
			assert.Error(t, err, "%q", tc.in)
		} else if assert.NoError(t, err, tc.in) {
			assert.Equal(t, tc.want, got)
		}
	}
}

func TestDenialAddress(t *testing.T) {
	assert.Equal(t, "example.com:443", Denial{Host: "example.com", Port: 443}.Address())
	assert.Equal(t, "[2001:db8::1]:80", Denial{Host: "2001:db8::1", Port: 80}.Address())
}

func TestSocksCode(t *testing.T) {
	assert.Equal(t, byte(socksGeneralFailure), socksCode(&dialError{err: errors.New("i/o timeout")}))
	assert.Equal(t, byte(socksHostUnreachable), socksCode(&resolveError{err: errors.New("x")}))
	assert.Equal(t, byte(socksNotAllowed), socksCode(&deniedError{}))
}
