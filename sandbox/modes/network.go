package modes

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// ErrAllowlist is wrapped by the errors of an invalid network allowlist.
var ErrAllowlist = errors.New("invalid network allowlist")

// Allowlist is the network policy between off and everything: the command
// has no route out except the sandbox's egress proxy, which reaches the
// Domains that no Deny pattern matches, and the loopback services of Hosts,
// which the supervisor forwards.
//
// A pattern is a host name ("example.com": that name only), a wildcard
// ("*.example.com": every name below example.com, not example.com itself),
// an IP address or a CIDR prefix ("10.0.0.0/8"). Names resolve in the
// proxy, which dials only public unicast addresses unless an IP or CIDR
// pattern allows the address explicitly: a name that resolves to a private,
// loopback, link-local or metadata address (169.254.169.254) is refused.
type Allowlist struct {
	Domains []string `json:"domains,omitempty"`
	Deny    []string `json:"deny,omitempty"`
	// Hosts are loopback services of the host ("127.0.0.1:5432",
	// "localhost:6379", "[::1]:8080"), reachable at the same address inside
	// the sandbox.
	Hosts []netip.AddrPort `json:"hosts,omitempty"`
	// Resolve pins names for the proxy, as curl --resolve does; other
	// names use the host's resolver.
	Resolve map[string][]netip.Addr `json:"resolve,omitempty"`
	// Upstream, when not nil, is the caller's proxy the egress proxy
	// reaches allowed destinations through (see Upstream).
	Upstream *Upstream `json:"upstream,omitempty"`
}

// NewAllowlist builds the allowlist of the --allow-domain, --deny-domain,
// --allow-host and --resolve values (ParseHost, ParseResolve); nil when
// neither domains nor hosts are given.
func NewAllowlist(domains, deny, hosts, resolve []string) (*Allowlist, error) {
	if len(domains) == 0 && len(hosts) == 0 {
		return nil, nil
	}
	al := &Allowlist{Domains: domains, Deny: deny}
	for _, h := range hosts {
		ap, err := ParseHost(h)
		if err != nil {
			return nil, err
		}
		al.Hosts = append(al.Hosts, ap)
	}
	for _, r := range resolve {
		name, addrs, err := ParseResolve(r)
		if err != nil {
			return nil, err
		}
		if al.Resolve == nil {
			al.Resolve = map[string][]netip.Addr{}
		}
		al.Resolve[name] = append(al.Resolve[name], addrs...)
	}
	return al, nil
}

// ParseHost parses an --allow-host value: a loopback HOST:PORT, where HOST
// is "localhost" (127.0.0.1), an IPv4 loopback address or [::1].
func ParseHost(s string) (netip.AddrPort, error) {
	host, port, err := splitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: --allow-host %q: %w", ErrAllowlist, s, err)
	}
	var ip netip.Addr
	if strings.EqualFold(host, "localhost") {
		ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	} else if ip, err = netip.ParseAddr(host); err != nil || ip.Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("%w: --allow-host %q: %s is not an IP address or localhost", ErrAllowlist, s, host)
	}
	ip = ip.Unmap()
	if !ip.IsLoopback() {
		return netip.AddrPort{}, fmt.Errorf("%w: --allow-host %q: %s is not a loopback address (a service elsewhere is reached by name: --allow-domain)", ErrAllowlist, s, ip)
	}
	return netip.AddrPortFrom(ip, port), nil
}

func splitHostPort(s string) (string, uint16, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", 0, errors.New("want HOST:PORT")
	}
	host, ps := s[:i], s[i+1:]
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	} else if strings.Contains(host, ":") {
		return "", 0, errors.New("an IPv6 address goes in brackets ([::1]:PORT)")
	}
	p, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("bad port %q (want 1-65535)", ps)
	}
	return host, uint16(p), nil
}

// ParseResolve parses a --resolve value, NAME=ADDR[,ADDR...].
func ParseResolve(s string) (string, []netip.Addr, error) {
	name, list, ok := strings.Cut(s, "=")
	if !ok || name == "" || list == "" {
		return "", nil, fmt.Errorf("%w: --resolve %q: want NAME=ADDR[,ADDR...]", ErrAllowlist, s)
	}
	n, err := normalName(name)
	if err != nil {
		return "", nil, fmt.Errorf("%w: --resolve %q: %w", ErrAllowlist, s, err)
	}
	var addrs []netip.Addr
	for a := range strings.SplitSeq(list, ",") {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return "", nil, fmt.Errorf("%w: --resolve %q: %q is not an IP address", ErrAllowlist, s, a)
		}
		addrs = append(addrs, ip.Unmap())
	}
	return n, addrs, nil
}

// pattern is one parsed allowlist entry.
type pattern struct {
	name   string       // exact name, or the suffix of a wildcard
	suffix bool         // "*.name"
	prefix netip.Prefix // an IP or CIDR pattern (name empty)
}

func parsePattern(s string) (pattern, error) {
	if pfx, err := netip.ParsePrefix(s); err == nil {
		return pattern{prefix: pfx.Masked()}, nil
	}
	if ip, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		ip = ip.Unmap()
		return pattern{prefix: netip.PrefixFrom(ip, ip.BitLen())}, nil
	}
	suffix := false
	rest := s
	if r, ok := strings.CutPrefix(s, "*."); ok {
		suffix, rest = true, r
	}
	n, err := normalName(rest)
	if err != nil {
		return pattern{}, err
	}
	if suffix && !strings.Contains(n, ".") {
		return pattern{}, fmt.Errorf("%q would match a whole top-level domain", s)
	}
	return pattern{name: n, suffix: suffix}, nil
}

// normalName lowercases a host name and drops one trailing dot, refusing
// what is not a DNS name (labels of letters, digits, '-' and '_').
func normalName(s string) (string, error) {
	n := strings.TrimSuffix(strings.ToLower(s), ".")
	if n == "" || len(n) > 253 {
		return "", fmt.Errorf("%q is not a host name", s)
	}
	for l := range strings.SplitSeq(n, ".") {
		if l == "" || len(l) > 63 || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") {
			return "", fmt.Errorf("%q is not a host name", s)
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("%q is not a host name (a wildcard is only a leading \"*.\")", s)
			}
		}
	}
	return n, nil
}

func (p pattern) matchName(host string) bool {
	if p.name == "" {
		ip, err := netip.ParseAddr(host)
		return err == nil && p.prefix.Contains(ip.Unmap())
	}
	if p.suffix {
		return strings.HasSuffix(host, "."+p.name)
	}
	return host == p.name
}

// canonical validates a and returns it with patterns normalised, sorted
// and deduplicated.
func (a Allowlist) canonical() (Allowlist, error) {
	out := Allowlist{Upstream: a.Upstream}
	if u := a.Upstream; u != nil {
		for _, p := range []*url.URL{u.HTTPS, u.HTTP} {
			if p != nil && ((p.Scheme != "http" && p.Scheme != "https") || p.Hostname() == "") {
				return Allowlist{}, fmt.Errorf("%w: upstream proxy %s: want an http:// or https:// proxy URL", ErrAllowlist, redact(p))
			}
		}
	}
	for _, set := range []struct {
		in   []string
		out  *[]string
		flag string
	}{{a.Domains, &out.Domains, "--allow-domain"}, {a.Deny, &out.Deny, "--deny-domain"}} {
		for _, s := range set.in {
			p, err := parsePattern(s)
			if err != nil {
				return Allowlist{}, fmt.Errorf("%w: %s %q: %w", ErrAllowlist, set.flag, s, err)
			}
			*set.out = append(*set.out, p.String())
		}
		*set.out = dedupe(*set.out)
	}
	seen := map[netip.AddrPort]bool{}
	for _, h := range a.Hosts {
		if !h.IsValid() || !h.Addr().Unmap().IsLoopback() || h.Port() == 0 {
			return Allowlist{}, fmt.Errorf("%w: --allow-host %s: not a loopback HOST:PORT", ErrAllowlist, h)
		}
		h = netip.AddrPortFrom(h.Addr().Unmap(), h.Port())
		if !seen[h] {
			seen[h] = true
			out.Hosts = append(out.Hosts, h)
		}
	}
	sort.Slice(out.Hosts, func(i, j int) bool { return out.Hosts[i].Compare(out.Hosts[j]) < 0 })
	for name, addrs := range a.Resolve {
		n, err := normalName(name)
		if err != nil || len(addrs) == 0 {
			return Allowlist{}, fmt.Errorf("%w: --resolve %q: want a host name and at least one address", ErrAllowlist, name)
		}
		if out.Resolve == nil {
			out.Resolve = map[string][]netip.Addr{}
		}
		for _, ip := range addrs {
			if !ip.IsValid() {
				return Allowlist{}, fmt.Errorf("%w: --resolve %q: an invalid address", ErrAllowlist, name)
			}
			out.Resolve[n] = append(out.Resolve[n], ip.Unmap())
		}
	}
	return out, nil
}

func (p pattern) String() string {
	switch {
	case p.name == "" && p.prefix.IsSingleIP():
		return p.prefix.Addr().String()
	case p.name == "":
		return p.prefix.String()
	case p.suffix:
		return "*." + p.name
	}
	return p.name
}

func matchAny(list []string, host string) bool {
	for _, s := range list {
		if p, err := parsePattern(s); err == nil && p.matchName(host) {
			return true
		}
	}
	return false
}

// AllowsName reports whether the proxy may reach host (a name, lowercased
// without a trailing dot, or an IP literal), and when not, why. A Deny
// match wins over every Domains match.
func (a *Allowlist) AllowsName(host string) (bool, string) {
	if matchAny(a.Deny, host) {
		return false, "denied by --deny-domain"
	}
	if matchAny(a.Domains, host) {
		return true, ""
	}
	return false, "not in the allowlist"
}

// AllowsIP reports whether an IP or CIDR pattern of Domains (and of no
// Deny pattern) covers ip: only then may the proxy dial a non-public
// address.
func (a *Allowlist) AllowsIP(ip netip.Addr) bool {
	ip = ip.Unmap()
	covered := func(list []string) bool {
		for _, s := range list {
			if p, err := parsePattern(s); err == nil && p.name == "" && p.prefix.Contains(ip) {
				return true
			}
		}
		return false
	}
	return !covered(a.Deny) && covered(a.Domains)
}

// AllowsHost reports whether ap is one of Hosts.
func (a *Allowlist) AllowsHost(ap netip.AddrPort) bool {
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	for _, h := range a.Hosts {
		if h == ap {
			return true
		}
	}
	return false
}
