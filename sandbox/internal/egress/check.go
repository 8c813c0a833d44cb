package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// target is a normalised destination: host lowercased without a trailing
// dot or brackets; ip set when host is an IP literal.
type target struct {
	host string
	ip   netip.Addr
	port int
}

func (t target) String() string { return net.JoinHostPort(t.host, strconv.Itoa(t.port)) }

// errBadHost is an unusable destination (400, SOCKS5 reply 0x01): not a
// denial.
var errBadHost = errors.New("invalid destination host")

// normalizeHost lowercases h, strips IPv6 brackets and one trailing dot and
// rejects empty hosts, hosts over 253 bytes, with spaces or control
// characters, or with an IPv6 zone. An IP literal comes back in its netip
// string form (IPv4-mapped IPv6 unmapped) with ip set.
func normalizeHost(h string) (string, netip.Addr, error) {
	if len(h) >= 2 && h[0] == '[' && h[len(h)-1] == ']' {
		h = h[1 : len(h)-1]
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" || len(h) > 253 {
		return "", netip.Addr{}, errBadHost
	}
	for i := 0; i < len(h); i++ {
		if b := h[i]; b <= ' ' || b == 0x7f || b == '%' || b == '/' || b == '[' || b == ']' {
			return "", netip.Addr{}, errBadHost
		}
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		ip = ip.Unmap()
		return ip.String(), ip, nil
	}
	if strings.Contains(h, ":") {
		return "", netip.Addr{}, errBadHost
	}
	return h, netip.Addr{}, nil
}

// parseAuthority parses host:port (a missing port is defaultPort, when that
// is not 0).
func parseAuthority(hostport string, defaultPort int) (target, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		if defaultPort == 0 {
			return target{}, errBadHost
		}
		host, portStr = hostport, strconv.Itoa(defaultPort)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return target{}, errors.New("invalid destination port")
	}
	h, ip, err := normalizeHost(host)
	if err != nil {
		return target{}, err
	}
	return target{host: h, ip: ip, port: port}, nil
}

// Ranges that are not public unicast beyond what netip's predicates cover
// (loopback, private, link-local, multicast, unspecified).
var nonPublic = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"100.64.0.0/10",   // CGNAT shared space
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // TEST-NET-1
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // TEST-NET-2
		"203.0.113.0/24",  // TEST-NET-3
		"240.0.0.0/4",     // reserved, and the broadcast address
		"::/96",           // IPv4-compatible (deprecated)
		"::ffff:0:0:0/96", // IPv4-translated (SIIT)
		"64:ff9b:1::/48",  // local-use NAT64
		"100::/64",        // discard-only
		"2001:db8::/32",   // documentation
		"2001:10::/28",    // ORCHID
		"2001:20::/28",    // ORCHIDv2
		"fec0::/10",       // site-local (deprecated)
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// isPublic reports whether ip is a public unicast address. IPv4-mapped
// addresses are judged by their IPv4 address, and so are the IPv4
// addresses embedded in NAT64 (64:ff9b::/96) and 6to4 (2002::/16) ones.
func isPublic(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsGlobalUnicast() || ip.IsPrivate() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip):
			return isPublic(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(ip):
			return isPublic(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	return true
}

// deniedError is a refusal by the policy or the address check.
type deniedError struct{ d Denial }

func (e *deniedError) Error() string { return e.d.message("") }

// resolveError is a failed resolution of an allowed name: not a denial.
type resolveError struct {
	host string
	err  error
}

func (e *resolveError) Error() string { return "cannot resolve " + e.host + ": " + e.err.Error() }
func (e *resolveError) Unwrap() error { return e.err }

// dialError is a failed dial of an allowed, checked destination.
type dialError struct {
	addr string // host:port as asked
	err  error
}

func (e *dialError) Error() string { return "cannot connect to " + e.addr + ": " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

func (sv *Served) denial(t target, proto, why string) *deniedError {
	return &deniedError{Denial{Host: t.host, Port: t.port, Reason: why, Proto: proto}}
}

// report passes d to the session's OnDeny.
func (sv *Served) report(d Denial) {
	if sv.s.OnDeny != nil {
		sv.s.OnDeny(d)
	}
}

// checkName asks the policy about the host the client named.
func (sv *Served) checkName(t target, proto string) *deniedError {
	if sv.s.Policy == nil {
		return sv.denial(t, proto, "no policy")
	}
	ok, why := sv.s.Policy.AllowsName(t.host)
	if ok {
		return nil
	}
	if why == "" {
		why = "not in the allowlist"
	}
	return sv.denial(t, proto, why)
}

// addresses resolves t (an IP literal is its own address) and keeps the
// addresses that are public or allowed explicitly, in the resolver's order.
func (sv *Served) addresses(ctx context.Context, t target, proto string) ([]netip.Addr, error) {
	if t.ip.IsValid() {
		if isPublic(t.ip) || sv.s.Policy.AllowsIP(t.ip) {
			return []netip.Addr{t.ip}, nil
		}
		return nil, sv.denial(t, proto, "not a public address")
	}
	var ips []netip.Addr
	var err error
	pinned := false
	if sv.s.Resolve != nil {
		ips, pinned = sv.s.Resolve(t.host)
	}
	if !pinned {
		ips, err = sv.p.resolve(ctx, t.host)
	}
	if err != nil {
		return nil, &resolveError{host: t.host, err: err}
	}
	if len(ips) == 0 {
		return nil, &resolveError{host: t.host, err: errors.New("no addresses")}
	}
	var ok []netip.Addr
	var refused string // the reason of the first address refused
	for _, ip := range ips {
		ip = ip.Unmap().WithZone("")
		switch {
		case sv.deniesIP(ip):
			if refused == "" {
				refused = deniedAddrPrefix + ip.String()
			}
		case isPublic(ip) || sv.s.Policy.AllowsIP(ip):
			ok = append(ok, ip)
		case refused == "":
			refused = privatePrefix + ip.String()
		}
	}
	if len(ok) == 0 {
		return nil, sv.denial(t, proto, refused)
	}
	return ok, nil
}

// deniesIP reports whether a --deny-domain pattern covers ip, an address a
// name resolved to: the policy is asked about it as about the IP literal
// (an IP or CIDR deny pattern refuses it, whatever allows it).
func (sv *Served) deniesIP(ip netip.Addr) bool {
	ok, why := sv.s.Policy.AllowsName(ip.String())
	return !ok && strings.HasPrefix(why, deniedPrefix)
}

// dialTarget checks t (name, then every address) and dials the allowed
// addresses in order; the connection it returns is tracked in sv. Its
// errors are a *deniedError, *resolveError or *dialError (or net.ErrClosed
// once sv is closed).
func (sv *Served) dialTarget(ctx context.Context, t target, proto string) (net.Conn, error) {
	if d := sv.checkName(t, proto); d != nil {
		return nil, d
	}
	if up := sv.s.Upstream.proxyFor(t, proto); up != nil {
		return sv.dialVia(ctx, up, t, proto)
	}
	rctx, cancel := sv.bind(ctx)
	ips, err := sv.addresses(rctx, t, proto)
	cancel()
	if err != nil {
		return nil, err
	}
	var first error
	for _, ip := range ips {
		dctx, cancel := sv.bind(ctx)
		c, err := sv.p.dial(dctx, "tcp", netip.AddrPortFrom(ip, uint16(t.port)).String())
		cancel()
		if err == nil {
			if !sv.trackUp(c) {
				c.Close()
				return nil, net.ErrClosed
			}
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil || sv.ctx.Err() != nil {
			break
		}
	}
	return nil, &dialError{addr: t.String(), err: first}
}

// dialVia reaches t, whose name the policy allowed, through the upstream
// proxy up. The address check stays: an IP literal is checked as on the
// direct path, and a name is resolved here too, so that one resolving to
// a private or denied address is refused as on the direct path; a name
// the local resolver cannot resolve goes to the upstream, which resolves
// it (behind a corporate proxy the local resolver often knows only
// internal names). The tunnel is opened to the name, never to an address
// resolved here. An upstream's refusal is reported (a Denial whose Reason
// says so) and returned as an *upstreamError.
func (sv *Served) dialVia(ctx context.Context, up *url.URL, t target, proto string) (net.Conn, error) {
	rctx, cancel := sv.bind(ctx)
	_, err := sv.addresses(rctx, t, proto)
	cancel()
	var re *resolveError
	if err != nil && !errors.As(err, &re) {
		return nil, err
	}
	dctx, cancel := sv.bind(ctx)
	c, err := sv.dialUpstream(dctx, up, t)
	cancel()
	if err != nil {
		var ue *upstreamError
		if errors.As(err, &ue) {
			sv.report(Denial{Host: t.host, Port: t.port, Proto: proto, Reason: ue.Error()})
		}
		return nil, err
	}
	if !sv.trackUp(c) {
		c.Close()
		return nil, net.ErrClosed
	}
	return c, nil
}
