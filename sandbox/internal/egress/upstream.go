package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Upstream is the caller's proxy (its HTTPS_PROXY, HTTP_PROXY and
// NO_PROXY): an allowed destination is reached through it with CONNECT
// unless NoProxy excludes it. The zero value (or a nil *Upstream) dials
// directly.
type Upstream struct {
	// HTTPS is the proxy of CONNECT and SOCKS5 tunnels, HTTP the one of
	// plain-HTTP requests (which are tunnelled with CONNECT too); nil
	// dials directly. The schemes are http and https; user:password in
	// the URL is sent as Proxy-Authorization (Basic).
	HTTPS, HTTP *url.URL
	// NoProxy is a NO_PROXY value: a comma-separated list of "*", host
	// names (a suffix match on labels; a leading "." or "*." is the same),
	// IP addresses and CIDR prefixes, each optionally with ":port".
	NoProxy string
	// RootCAs verifies an https:// upstream's certificate; nil: the
	// system's roots.
	RootCAs *x509.CertPool
}

// upstreamError is the upstream proxy's refusal of a CONNECT.
type upstreamError struct {
	proxy  string // host:port of the upstream, no credentials
	status string // "407 Proxy Authentication Required"
}

func (e *upstreamError) Error() string {
	return "upstream proxy " + e.proxy + " refused (" + e.status + ")"
}

// proxyFor returns the upstream proxy for t reached by proto, or nil.
func (u *Upstream) proxyFor(t target, proto string) *url.URL {
	if u == nil {
		return nil
	}
	p := u.HTTPS
	if proto == "http" {
		p = u.HTTP
	}
	if p == nil || noProxy(u.NoProxy, t) {
		return nil
	}
	return p
}

// noProxy reports whether the NO_PROXY list np excludes t.
func noProxy(np string, t target) bool {
	for _, e := range strings.Split(np, ",") {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		if e == "*" {
			return true
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			if t.ip.IsValid() && p.Contains(t.ip) {
				return true
			}
			continue
		}
		host, port := e, 0
		if h, ps, err := net.SplitHostPort(e); err == nil {
			n, err := strconv.Atoi(ps)
			if err != nil {
				continue
			}
			host, port = h, n
		}
		if port != 0 && port != t.port {
			continue
		}
		host = strings.Trim(host, "[]")
		if ip, err := netip.ParseAddr(host); err == nil {
			if t.ip.IsValid() && ip.Unmap() == t.ip {
				return true
			}
			continue
		}
		host = strings.TrimPrefix(strings.TrimPrefix(host, "*"), ".")
		host = strings.TrimSuffix(host, ".")
		if host == "" {
			continue
		}
		if t.host == host || strings.HasSuffix(t.host, "."+host) {
			return true
		}
	}
	return false
}

// proxyAddress is host:port of proxy URL u (default port 80 for http,
// 443 for https).
func proxyAddress(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// dialUpstream opens a tunnel to t through proxy u: it dials u (no
// allowlist or address check: the upstream proxy is the caller's, dialed
// from outside the sandbox), sends CONNECT with t's name, and returns the
// connection once u answered 2xx. A refusal is an *upstreamError.
func (sv *Served) dialUpstream(ctx context.Context, u *url.URL, t target) (net.Conn, error) {
	var roots *x509.CertPool
	if sv.s.Upstream != nil {
		roots = sv.s.Upstream.RootCAs
	}
	addr := proxyAddress(u)
	c, err := sv.p.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, &dialError{addr: t.String() + " via upstream proxy " + addr, err: err}
	}
	if u.Scheme == "https" {
		tc := tls.Client(c, &tls.Config{ServerName: u.Hostname(), RootCAs: roots, MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, &dialError{addr: t.String() + " via upstream proxy " + addr, err: err}
		}
		c = tc
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	} else {
		c.SetDeadline(time.Now().Add(sv.p.timeout))
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := "CONNECT " + t.String() + " HTTP/1.1\r\nHost: " + t.String() + "\r\n"
	if u.User != nil {
		pw, _ := u.User.Password()
		cred := base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pw))
		req += "Proxy-Authorization: Basic " + cred + "\r\n"
	}
	req += "\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		c.Close()
		return nil, &dialError{addr: t.String() + " via upstream proxy " + addr, err: err}
	}
	br := bufio.NewReaderSize(c, 4096)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, &dialError{addr: t.String() + " via upstream proxy " + addr, err: err}
	}
	if resp.StatusCode/100 != 2 {
		c.Close()
		return nil, &upstreamError{proxy: addr, status: resp.Status}
	}
	if br.Buffered() > 0 {
		// The tunnel's first bytes come from the destination only after
		// the client's; a proxy that sends data early is broken.
		c.Close()
		return nil, &dialError{addr: t.String() + " via upstream proxy " + addr, err: fmt.Errorf("unexpected data after the CONNECT answer")}
	}
	c.SetDeadline(time.Time{})
	stop()
	return c, nil
}
