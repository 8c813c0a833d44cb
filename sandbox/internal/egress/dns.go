package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"time"
)

// DNS answers, for clients that resolve a name before they hand it to the
// proxy: the stub resolver of a sandboxed command's net namespace.

// DNS message constants (RFC 1035).
const (
	dnsHeaderLen  = 12
	dnsMaxUDP     = 512 // a reply is truncated (TC) past this
	dnsTypeA      = 1
	dnsTypeAAAA   = 28
	dnsClassIN    = 1
	dnsTTL        = 30 // seconds: short, the proxy resolves again anyway
	rcodeOK       = 0
	rcodeFormErr  = 1
	rcodeServFail = 2
	rcodeNXDomain = 3
	rcodeNotImp   = 4
	rcodeRefused  = 5
	// dnsInflight bounds the queries one ServeDNS resolves at once; more
	// are dropped (the client retries).
	dnsInflight = 64
)

// ProtoDNS is the Proto of a Denial made by ServeDNS: a name the stub
// resolver refused to resolve.
const ProtoDNS = "dns"

// ServeDNS answers the DNS queries arriving on pc — a UDP socket in one
// sandboxed command's net namespace, at a nameserver address of its
// resolv.conf — under session s, until the returned Served is closed: an A
// or AAAA query for a name the policy allows gets the addresses the proxy
// would dial (the same resolution and address check, so no private address
// is ever revealed), any other type of an allowed name an empty answer; a
// name the policy refuses, or whose addresses are all refused, gets
// NXDOMAIN and one Denial (Proto ProtoDNS, Port 53). A client that then
// connects to an answered address directly is refused by the sandbox; one
// that hands the name to the proxy works.
func (p *Proxy) ServeDNS(pc net.PacketConn, s Session) *Served {
	sv := p.newServed(nil, s)
	sv.pc = pc
	sv.mu.Lock()
	if sv.closed {
		sv.mu.Unlock()
		pc.Close()
		return sv
	}
	sv.wg.Add(1)
	sv.mu.Unlock()
	go sv.serveDNS()
	return sv
}

func (sv *Served) serveDNS() {
	defer sv.wg.Done()
	slots := make(chan struct{}, dnsInflight)
	for {
		buf := make([]byte, 1500)
		n, from, err := sv.pc.ReadFrom(buf)
		if err != nil {
			if sv.isClosed() || !temporary(err) {
				return
			}
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			continue // too many at once: dropped, the client retries
		}
		sv.wg.Add(1)
		go func() {
			defer sv.wg.Done()
			defer func() { <-slots }()
			if reply := sv.answer(buf[:n]); reply != nil {
				sv.pc.SetWriteDeadline(time.Now().Add(handshakeTimeout))
				sv.pc.WriteTo(reply, from)
			}
		}()
	}
}

// dnsQuery is the one question of a query.
type dnsQuery struct {
	id            uint16
	rd            bool
	question      []byte // QNAME QTYPE QCLASS, as sent
	name          string // lowercased, without the final dot
	qtype, qclass uint16
}

var errDNSFormat = errors.New("malformed DNS query")

// parseDNSQuery reads a query with exactly one question; it refuses
// responses, compression in the question and oversized names.
func parseDNSQuery(b []byte) (dnsQuery, uint8, error) {
	if len(b) < dnsHeaderLen {
		return dnsQuery{}, 0, errDNSFormat
	}
	q := dnsQuery{id: binary.BigEndian.Uint16(b), rd: b[2]&1 != 0}
	flags := binary.BigEndian.Uint16(b[2:])
	if flags&0x8000 != 0 {
		return dnsQuery{}, 0, errDNSFormat // a response: never answered
	}
	if opcode := (flags >> 11) & 0xf; opcode != 0 {
		return q, rcodeNotImp, nil
	}
	if binary.BigEndian.Uint16(b[4:]) != 1 {
		return q, rcodeFormErr, nil
	}
	var labels []string
	i := dnsHeaderLen
	for {
		if i >= len(b) {
			return q, rcodeFormErr, nil
		}
		l := int(b[i])
		i++
		if l == 0 {
			break
		}
		if l > 63 || i+l > len(b) {
			return q, rcodeFormErr, nil // a pointer (0xc0) or a label past the end
		}
		labels = append(labels, strings.ToLower(string(b[i:i+l])))
		i += l
	}
	if i+4 > len(b) {
		return q, rcodeFormErr, nil
	}
	q.question = b[dnsHeaderLen : i+4]
	q.qtype, q.qclass = binary.BigEndian.Uint16(b[i:]), binary.BigEndian.Uint16(b[i+2:])
	q.name = strings.Join(labels, ".")
	if len(q.name) > 253 {
		return q, rcodeFormErr, nil
	}
	return q, rcodeOK, nil
}

// answer builds the reply to one query, or nil when none is due.
func (sv *Served) answer(b []byte) []byte {
	q, rcode, err := parseDNSQuery(b)
	if err != nil {
		return nil
	}
	if rcode != rcodeOK || q.qclass != dnsClassIN {
		if rcode == rcodeOK {
			rcode = rcodeNotImp
		}
		return dnsReply(q, rcode, nil)
	}
	host, ip, err := normalizeHost(q.name)
	if err != nil || ip.IsValid() {
		return dnsReply(q, rcodeRefused, nil)
	}
	t := target{host: host, port: 53}
	if d := sv.checkName(t, ProtoDNS); d != nil {
		sv.report(d.d)
		return dnsReply(q, rcodeNXDomain, nil)
	}
	if q.qtype != dnsTypeA && q.qtype != dnsTypeAAAA {
		return dnsReply(q, rcodeOK, nil) // the name exists; no records of that type here
	}
	ctx, cancel := sv.bind(context.Background())
	ips, err := sv.addresses(ctx, t, ProtoDNS)
	cancel()
	var denied *deniedError
	switch {
	case errors.As(err, &denied):
		sv.report(denied.d)
		return dnsReply(q, rcodeNXDomain, nil)
	case err != nil:
		return dnsReply(q, rcodeServFail, nil)
	}
	var rrs []netip.Addr
	for _, a := range ips {
		if a.Is4() == (q.qtype == dnsTypeA) {
			rrs = append(rrs, a)
		}
	}
	return dnsReply(q, rcodeOK, rrs)
}

// dnsReply is the reply to q with rcode and an A or AAAA record per
// address, truncated (TC) to fit in dnsMaxUDP bytes.
func dnsReply(q dnsQuery, rcode uint8, addrs []netip.Addr) []byte {
	out := make([]byte, dnsHeaderLen, dnsMaxUDP)
	binary.BigEndian.PutUint16(out, q.id)
	flags := uint16(0x8000 | 0x0080 | uint16(rcode)) // QR, RA
	if q.rd {
		flags |= 0x0100
	}
	if q.question == nil {
		binary.BigEndian.PutUint16(out[2:], flags)
		return out
	}
	binary.BigEndian.PutUint16(out[4:], 1)
	out = append(out, q.question...)
	n := 0
	for _, a := range addrs {
		rd := a.AsSlice()
		if len(out)+12+len(rd) > dnsMaxUDP {
			flags |= 0x0200 // TC
			break
		}
		typ := uint16(dnsTypeA)
		if len(rd) == 16 {
			typ = dnsTypeAAAA
		}
		out = append(out, 0xc0, dnsHeaderLen) // the name: a pointer to the question's
		out = binary.BigEndian.AppendUint16(out, typ)
		out = binary.BigEndian.AppendUint16(out, dnsClassIN)
		out = binary.BigEndian.AppendUint32(out, dnsTTL)
		out = binary.BigEndian.AppendUint16(out, uint16(len(rd)))
		out = append(out, rd...)
		n++
	}
	binary.BigEndian.PutUint16(out[2:], flags)
	binary.BigEndian.PutUint16(out[6:], uint16(n))
	return out
}
