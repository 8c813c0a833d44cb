// Package egress is the supervisor-side egress proxy: it lets a sandboxed
// command reach only the destinations its session's Policy allows.
//
// The sandbox hands the Proxy one net.Listener per sandboxed command (Serve)
// and points HTTP_PROXY, HTTPS_PROXY and ALL_PROXY at it. One port serves two
// protocols: a connection whose first byte is 0x05 speaks SOCKS5 (RFC 1928,
// no authentication, CONNECT only, remote DNS); any other speaks the HTTP
// proxy protocol (CONNECT tunnels and absolute-form plain HTTP requests,
// served by net/http). Forward relays a listener to one fixed loopback
// service without any policy or protocol.
//
// Every destination goes through the same checks, in this order: the host
// name (or IP literal) must be allowed by Policy.AllowsName; a name is then
// resolved by the proxy, and every address it resolves to (or the literal
// itself) must be a public unicast address unless Policy.AllowsIP allows it
// explicitly, and no --deny-domain IP or CIDR may cover it (as it would
// the literal); the refused addresses are dropped and the others dialed in
// order. The proxy dials the checked netip address, never the name again,
// so a second DNS answer cannot rebind an allowed name to a private address.
// A refusal is a 403 (HTTP) or reply 0x02 (SOCKS5) whose text names the
// destination, the reason and the --allow-domain option that would allow
// it, and is reported once to Session.OnDeny.
//
// Tunnels relay the raw connections, and pass half-closes on, through
// pooled buffers borrowed for one read and write at a time: a relay waits
// until its source has bytes before it borrows one, so an idle tunnel holds
// none. A command's Quota (one per sandboxed command, shared by its Serve,
// Forward and ServeConn calls) bounds what it makes the proxy hold: at most
// MaxConns open connections (DefaultMaxConns, 256) — the next is refused
// with a 503 or SOCKS5 reply 1 and a Denial with OverLimit set — and at
// most 8 buffers of 1 MiB (faster than splice(2) on loopback, measured),
// the other copies going through 32 KiB ones. Nothing waits forever on a
// client: handshakes have a read deadline, and Served.Close closes every
// listener and connection (client and upstream) before it waits for the
// goroutines. The package has no global state.
package egress
