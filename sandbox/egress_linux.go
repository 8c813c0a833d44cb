//go:build linux

package sandbox

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/egress"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/internal/facts"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// resolvConf is where the nameservers are read from.
const resolvConf = "/etc/resolv.conf"

// nameservers are the nameserver addresses of the resolv.conf at path (at
// most three, as the C library uses), without link-local ones with a zone;
// 127.0.0.1 when it names none or cannot be read (the C library's default).
func nameservers(path string) []netip.Addr {
	b, _ := os.ReadFile(path) // none: the default below
	var out []netip.Addr
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" || len(out) == 3 {
			continue
		}
		if ip, err := netip.ParseAddr(f[1]); err == nil && ip.Zone() == "" && !ip.IsUnspecified() && !slices.Contains(out, ip.Unmap()) {
			out = append(out, ip.Unmap())
		}
	}
	if len(out) == 0 {
		// The C library's default without a nameserver line.
		out = append(out, netip.AddrFrom4([4]byte{127, 0, 0, 1}))
	}
	return out
}

// EgressProxy is the egress proxy of the commands whose policy has a network
// allowlist (modes.Policy.Allowlist): HTTP (CONNECT and plain forwarding)
// and SOCKS5 on one port, which resolves names itself and reaches only what
// the allowlist allows. One serves many commands (an Executor has one); it
// listens on the host's loopback when the first command needs it, and
// accepts there only the connections the supervisor made for a command
// without a net namespace. A command with a net namespace of its own
// reaches it through listeners inside that namespace instead (see DESIGN).
// The zero value is not usable: call NewEgressProxy.
type EgressProxy struct {
	proxy *egress.Proxy

	mu      sync.Mutex
	host    net.Listener
	expect  map[uint16]*egressSession // local port of a connection about to arrive
	closed  bool
	serving sync.WaitGroup
}

// NewEgressProxy returns a proxy that listens on nothing yet.
func NewEgressProxy() *EgressProxy {
	return &EgressProxy{expect: map[uint16]*egressSession{}}
}

// address returns the host listener's address, listening first if needed.
func (e *EgressProxy) address() (netip.AddrPort, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return netip.AddrPort{}, ErrEgressClosed
	}
	if e.host == nil {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("egress proxy: listen on the host's loopback: %w", err)
		}
		if e.proxy == nil {
			e.proxy = egress.New(egress.Config{})
		}
		e.host = l
		e.serving.Add(1)
		go e.acceptHost(l)
	}
	return e.host.Addr().(*net.TCPAddr).AddrPort(), nil
}

// acceptHost serves the host listener: a connection whose source port the
// supervisor announced (Egress.Connecting) is served for its command; any
// other is closed at once, so the proxy is never a relay for the host.
func (e *EgressProxy) acceptHost(l net.Listener) {
	defer e.serving.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return
		}
		peer, _ := c.RemoteAddr().(*net.TCPAddr)
		e.mu.Lock()
		var s *egressSession
		if peer != nil && peer.IP.IsLoopback() {
			if s = e.expect[uint16(peer.Port)]; s != nil {
				delete(e.expect, uint16(peer.Port))
			}
		}
		e.mu.Unlock()
		if s == nil {
			c.Close()
			continue
		}
		e.proxy.ServeConn(c, s.session)
	}
}

// expectFrom lets the next connection from local port port be served for s.
func (e *EgressProxy) expectFrom(port uint16, s *egressSession) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expect[port] = s
	s.ports = append(s.ports, port)
}

// Close stops the proxy: its listener and every connection it serves.
func (e *EgressProxy) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	host, proxy := e.host, e.proxy
	e.mu.Unlock()
	if host != nil {
		host.Close()
	}
	e.serving.Wait()
	if proxy != nil {
		return proxy.Close()
	}
	return nil
}

// egressSession is one command's use of the proxy.
type egressSession struct {
	e       *EgressProxy
	session egress.Session
	proxy   netip.AddrPort // the host listener's address (the command's proxy address)
	hosts   []netip.AddrPort
	// dns are the nameservers of the host's resolv.conf: in a net
	// namespace the stub resolver answers at each (ServeDNS).
	dns     []netip.Addr
	mu      sync.Mutex
	served  []*egress.Served
	skipped int      // stub resolver sockets the runner could not make
	ports   []uint16 // announced source ports (under e.mu)
}

// newSession starts a command's use of e under allowlist al, recording
// refusals in log; dns are the nameservers the stub resolver answers at.
func (e *EgressProxy) newSession(al *modes.Allowlist, mode modes.Mode, log *facts.Log, dns []netip.Addr) (*egressSession, error) {
	addr, err := e.address()
	if err != nil {
		return nil, err
	}
	s := &egressSession{e: e, proxy: addr, hosts: al.Hosts, dns: dns}
	s.session = egress.Session{
		Policy:  al,
		Mode:    mode.String() + " mode",
		Resolve: pinned(al.Resolve),
		// The caller's proxy, its credentials included: they stay in
		// the supervisor (the command's HTTPS_PROXY is the sandbox's).
		Upstream: upstream(al.Upstream),
		// One quota for all the command's listeners and connections.
		Quota: egress.NewQuota(egress.DefaultMaxConns),
		OnDeny: func(d egress.Denial) {
			switch {
			case d.OverLimit:
				log.Add(facts.Denial{Op: facts.OpLimit, Address: limitProxyConns, Syscall: SyscallProxy, Errno: "EAGAIN", Reason: d.Reason})
			case d.Proto == egress.ProtoDNS:
				log.Add(facts.Denial{Op: OpResolve, Address: d.Host, Syscall: SyscallDNS, Errno: "NXDOMAIN", Reason: d.Reason})
			default:
				log.Add(facts.Denial{Op: "connect", Address: d.Address(), Syscall: SyscallProxy, Errno: "EACCES", Reason: d.Reason})
			}
		},
	}
	return s, nil
}

// limitProxyConns names the egress proxy's connection limit in a limit
// fact: {"op": "limit", "address": "proxy-connections", "syscall":
// "proxy", "errno": "EAGAIN"}, one fact counting every connection the
// proxy refused because the command held egress.DefaultMaxConns already
// (it is a resource limit the command hit, not a destination the
// allowlist refused: the client's 503 or SOCKS5 reply names that).
const limitProxyConns = "proxy-connections"

// pinned resolves the names of pins from them, and others with the host's
// resolver (nil: no pins).
func pinned(pins map[string][]netip.Addr) egress.ResolveFunc {
	if len(pins) == 0 {
		return nil
	}
	return func(name string) ([]netip.Addr, bool) {
		a, ok := pins[name]
		return a, ok
	}
}

// listenAddrs are the addresses the runner listens on in the command's net
// namespace: the proxy's first, then the hosts'.
func (s *egressSession) listenAddrs() string {
	out := []string{s.proxy.String()}
	for _, h := range s.hosts {
		out = append(out, h.String())
	}
	return strings.Join(out, ",")
}

// dnsAddrs are the addresses the runner binds the stub resolver to, after
// the listeners.
func (s *egressSession) dnsAddrs() string {
	var out []string
	for _, a := range s.dns {
		out = append(out, a.String())
	}
	return strings.Join(out, ",")
}

// sockets is how many sockets the runner hands over in a net namespace.
func (s *egressSession) sockets() int { return 1 + len(s.hosts) + len(s.dns) }

// serveListener serves the i-th socket the runner made in the command's
// net namespace (listenAddrs, then dnsAddrs); it takes fd.
func (s *egressSession) serveListener(i int, fd int) error {
	f := os.NewFile(uintptr(fd), "dsh-egress-socket")
	defer f.Close()
	if i >= s.sockets() {
		return fmt.Errorf("egress socket %d: the runner made more sockets than asked for", i)
	}
	var sv *egress.Served
	if i > len(s.hosts) {
		pc, err := net.FilePacketConn(f)
		if err != nil {
			return fmt.Errorf("egress stub resolver: %w", err)
		}
		sv = s.e.proxy.ServeDNS(pc, s.session)
	} else {
		l, err := net.FileListener(f)
		if err != nil {
			return fmt.Errorf("egress listener: %w", err)
		}
		if i == 0 {
			sv = s.e.proxy.Serve(l, s.session)
		} else {
			sv = s.e.proxy.Forward(l, s.hosts[i-1], s.session)
		}
	}
	s.mu.Lock()
	s.served = append(s.served, sv)
	s.mu.Unlock()
	return nil
}

// count is how many sockets the runner has handed over (or said it could
// not make).
func (s *egressSession) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.served) + s.skipped
}

// skip counts a socket the runner could not make.
func (s *egressSession) skip() {
	s.mu.Lock()
	s.skipped++
	s.mu.Unlock()
}

// close ends the command's use of the proxy: its listeners and
// connections, and the source ports still expected.
func (s *egressSession) close() {
	s.mu.Lock()
	served := s.served
	s.served = nil
	s.mu.Unlock()
	for _, sv := range served {
		sv.Close()
	}
	s.e.mu.Lock()
	for _, p := range s.ports {
		if s.e.expect[p] == s {
			delete(s.e.expect, p)
		}
	}
	s.ports = nil
	s.e.mu.Unlock()
}

// proxyEnv is the environment that points clients at the proxy: curl, git,
// pip, npm, go, cargo, apt and the Python and Node clients read these.
func (s *egressSession) proxyEnv() []string {
	hp := "http://" + s.proxy.String()
	socks := "socks5h://" + s.proxy.String()
	noProxy := "localhost,127.0.0.1,::1"
	var out []string
	for _, kv := range [][2]string{{"HTTP_PROXY", hp}, {"HTTPS_PROXY", hp}, {"ALL_PROXY", socks}, {"NO_PROXY", noProxy}} {
		out = append(out, kv[0]+"="+kv[1], strings.ToLower(kv[0])+"="+kv[1])
	}
	return out
}

// withoutProxyEnv drops the proxy variables (any case) from env.
func withoutProxyEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(name) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// upstream is the egress form of the allowlist's upstream proxy (nil: none).
func upstream(u *modes.Upstream) *egress.Upstream {
	if u == nil {
		return nil
	}
	return &egress.Upstream{HTTPS: u.HTTPS, HTTP: u.HTTP, NoProxy: u.NoProxy}
}
