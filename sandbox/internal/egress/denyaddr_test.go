package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// TestDenyDomainAddresses: a --deny-domain IP or CIDR applies to the
// addresses an allowed name resolves to, not only to IP literals: a name
// whose every address is denied is refused with a Denial naming the
// address (public or not, allowed by an IP pattern or not), a denied
// address among others is dropped, and nothing denied is dialed. The dial
// hook sends every dial to one loopback echo server, so a public address
// that gets through is seen.
func TestDenyDomainAddresses(t *testing.T) {
	target := echoServer(t)
	p := port(t, target.Addr())
	pins := map[string][]netip.Addr{
		"private.corp.test": {netip.MustParseAddr("10.1.2.3")},
		"public.corp.test":  {netip.MustParseAddr("8.8.8.8")},
		"loop.corp.test":    {netip.MustParseAddr("127.0.0.2")},
		"mixed.corp.test":   {netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("1.1.1.1")},
		"ok.corp.test":      {netip.MustParseAddr("1.1.1.1")},
	}
	al := &modes.Allowlist{
		Domains: []string{"*.corp.test", "127.0.0.0/8", "8.8.0.0/16"},
		Deny:    []string{"10.0.0.0/8", "8.8.8.0/24", "127.0.0.2"},
	}
	newDenyEnv := func(t *testing.T) *env {
		e := &env{t: t, dials: &dialRecorder{}}
		e.p = New(Config{DialTimeout: 5 * time.Second, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			e.dials.mu.Lock()
			e.dials.addrs = append(e.dials.addrs, addr)
			e.dials.mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, network, target.Addr().String())
		}})
		e.ln = &countingListener{Listener: listen(t)}
		e.sv = e.p.Serve(e.ln, Session{Policy: al, Mode: "workspace-write mode",
			Resolve: func(h string) ([]netip.Addr, bool) { a, ok := pins[h]; return a, ok },
			OnDeny:  func(d Denial) { e.mu.Lock(); e.denied = append(e.denied, d); e.mu.Unlock() }})
		t.Cleanup(func() { e.p.Close() })
		return e
	}
	for _, tc := range []struct {
		name, host, via string
		reason          string   // "" when allowed
		dialed          []string // the addresses dialed
	}{
		{name: "private address in a denied CIDR", host: "private.corp.test", via: "connect", reason: "resolves to a denied address 10.1.2.3"},
		{name: "public address in a denied CIDR", host: "public.corp.test", via: "connect", reason: "resolves to a denied address 8.8.8.8"},
		{name: "public address in a denied CIDR, plain HTTP", host: "public.corp.test", via: "http", reason: "resolves to a denied address 8.8.8.8"},
		{name: "public address in a denied CIDR, SOCKS5", host: "public.corp.test", via: "socks5", reason: "resolves to a denied address 8.8.8.8"},
		{name: "allowed by a CIDR, denied by an address", host: "loop.corp.test", via: "connect", reason: "resolves to a denied address 127.0.0.2"},
		{name: "a denied address among others is dropped", host: "mixed.corp.test", via: "connect", dialed: []string{"1.1.1.1"}},
		{name: "literal in a denied CIDR", host: "8.8.8.8", via: "connect", reason: "denied by --deny-domain"},
		{name: "allowed", host: "ok.corp.test", via: "connect", dialed: []string{"1.1.1.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := target.n.Load()
			e := newDenyEnv(t)
			dest := fmt.Sprintf("%s:%d", tc.host, p)
			var code int
			var body string
			switch tc.via {
			case "connect":
				resp, c, _ := e.connect(dest)
				code = resp.StatusCode
				if code != 200 { // a tunnel's body is the tunnel
					b, _ := io.ReadAll(resp.Body)
					body = string(b)
				}
				c.Close()
			case "http":
				tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr()})}
				defer tr.CloseIdleConnections()
				// (The echo server answers no HTTP: a request that gets
				// through fails.)
				resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + dest + "/")
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					code, body = resp.StatusCode, string(b)
				}
			case "socks5":
				reply, c := socksDial(t, e.addr(), []byte{0}, 1, domain(tc.host), p)
				c.Close()
				code = map[byte]int{0: 200, 2: 403}[reply[1]]
			}
			var want []string
			for _, a := range tc.dialed {
				want = append(want, fmt.Sprintf("%s:%d", a, p))
			}
			assert.Equal(t, want, e.dials.dialed(), "dialed")
			if tc.reason == "" {
				assert.Equal(t, 200, code)
				assert.Empty(t, e.denials())
				return
			}
			assert.Equal(t, 403, code, body)
			assert.Equal(t, []Denial{{Host: tc.host, Port: p, Reason: tc.reason, Proto: tc.via}}, e.denials())
			assert.Equal(t, before, target.n.Load(), "the target saw no connection")
			if tc.via == "connect" && tc.reason != "denied by --deny-domain" {
				ip := tc.reason[len("resolves to a denied address "):]
				assert.Equal(t, fmt.Sprintf("dsh-sandbox: connect to %s denied (workspace-write mode, %s); a --deny-domain pattern matches %s\n", dest, tc.reason, ip), body)
			}
		})
	}
}

// TestDenyDomainAddressesDNS: the stub resolver answers a name whose
// addresses are all denied with NXDOMAIN and a Denial, and leaves a denied
// address out of the answer to a name with others.
func TestDenyDomainAddressesDNS(t *testing.T) {
	al := &modes.Allowlist{Domains: []string{"*.corp.test"}, Deny: []string{"8.8.8.0/24"}}
	pins := map[string][]netip.Addr{
		"public.corp.test": {netip.MustParseAddr("8.8.8.8")},
		"mixed.corp.test":  {netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("1.1.1.1")},
	}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	p := New(Config{Resolve: resolveHook})
	t.Cleanup(func() { p.Close() })
	e := &dnsEnv{}
	e.sv = p.ServeDNS(pc, Session{Policy: al,
		Resolve: func(h string) ([]netip.Addr, bool) { a, ok := pins[h]; return a, ok },
		OnDeny:  func(d Denial) { e.mu.Lock(); e.denied = append(e.denied, d); e.mu.Unlock() }})
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = r.LookupNetIP(ctx, "ip4", "public.corp.test")
	var de *net.DNSError
	require.True(t, errors.As(err, &de), "%v", err)
	assert.True(t, de.IsNotFound, "NXDOMAIN, got %v", err)
	ips, err := r.LookupNetIP(ctx, "ip4", "mixed.corp.test")
	require.NoError(t, err)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("1.1.1.1")}, ips)
	assert.Equal(t, []Denial{{Host: "public.corp.test", Port: 53, Reason: "resolves to a denied address 8.8.8.8", Proto: ProtoDNS}}, e.denials())
}
