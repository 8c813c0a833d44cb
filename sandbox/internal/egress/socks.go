package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// SOCKS5 (RFC 1928) constants.
const (
	socksVersion = 0x05

	socksNoAuth       = 0x00
	socksNoAcceptable = 0xff

	socksCmdConnect = 0x01

	socksATYPIPv4   = 0x01
	socksATYPDomain = 0x03
	socksATYPIPv6   = 0x04

	socksSucceeded            = 0x00
	socksGeneralFailure       = 0x01
	socksNotAllowed           = 0x02
	socksNetUnreachable       = 0x03
	socksHostUnreachable      = 0x04
	socksConnRefused          = 0x05
	socksCmdNotSupported      = 0x07
	socksAddrTypeNotSupported = 0x08
)

// serveSOCKS serves a SOCKS5 connection whose version byte has been read,
// under the handshake deadline serveClient set. The caller releases c.
func (sv *Served) serveSOCKS(c *clientConn) {
	raw := c.Conn
	var buf [262]byte // the largest message: VER CMD RSV ATYP LEN name(255) PORT(2)
	// Greeting: NMETHODS METHODS...
	if _, err := io.ReadFull(raw, buf[:1]); err != nil {
		return
	}
	methods := buf[1 : 1+int(buf[0])]
	if _, err := io.ReadFull(raw, methods); err != nil {
		return
	}
	noAuth := false
	for _, m := range methods {
		if m == socksNoAuth {
			noAuth = true
		}
	}
	if !noAuth {
		raw.Write([]byte{socksVersion, socksNoAcceptable})
		return
	}
	if _, err := raw.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		return
	}
	// Request: VER CMD RSV ATYP DST.ADDR DST.PORT
	if _, err := io.ReadFull(raw, buf[:4]); err != nil || buf[0] != socksVersion {
		return
	}
	cmd := buf[1]
	var t target
	var host string
	switch buf[3] {
	case socksATYPIPv4:
		if _, err := io.ReadFull(raw, buf[:4+2]); err != nil {
			return
		}
		t.ip = netip.AddrFrom4([4]byte(buf[:4]))
		t.port = int(buf[4])<<8 | int(buf[5])
	case socksATYPIPv6:
		if _, err := io.ReadFull(raw, buf[:16+2]); err != nil {
			return
		}
		t.ip = netip.AddrFrom16([16]byte(buf[:16])).Unmap()
		t.port = int(buf[16])<<8 | int(buf[17])
	case socksATYPDomain:
		if _, err := io.ReadFull(raw, buf[:1]); err != nil {
			return
		}
		n := int(buf[0])
		if _, err := io.ReadFull(raw, buf[:n+2]); err != nil {
			return
		}
		host = string(buf[:n])
		t.port = int(buf[n])<<8 | int(buf[n+1])
	default:
		socksReply(raw, socksAddrTypeNotSupported, nil)
		return
	}
	if cmd != socksCmdConnect {
		socksReply(raw, socksCmdNotSupported, nil)
		return
	}
	if t.ip.IsValid() {
		t.host = t.ip.String()
	} else {
		h, ip, err := normalizeHost(host)
		if err != nil {
			socksReply(raw, socksGeneralFailure, nil)
			return
		}
		t.host, t.ip = h, ip
	}
	if t.port == 0 {
		socksReply(raw, socksGeneralFailure, nil)
		return
	}
	if c.adm == overQuota {
		sv.report(sv.overLimit(t, "socks5"))
		socksReply(raw, socksGeneralFailure, nil)
		return
	}
	up, err := sv.dialTarget(context.Background(), t, "socks5")
	// The handshake is over (the dial may have used most of its deadline):
	// the reply and the tunnel have none.
	raw.SetDeadline(time.Time{})
	if err != nil {
		var de *deniedError
		if errors.As(err, &de) {
			sv.report(de.d)
		}
		socksReply(raw, socksCode(err), nil)
		return
	}
	defer sv.dropUp(up)
	if socksReply(raw, socksSucceeded, up.LocalAddr()) != nil {
		return
	}
	sv.relay(raw, up)
}

// socksCode is the reply code for a failed dialTarget.
func socksCode(err error) byte {
	var de *deniedError
	var re *resolveError
	switch {
	case errors.As(err, &de):
		return socksNotAllowed
	case errors.As(err, &re):
		return socksHostUnreachable
	case errors.Is(err, syscall.ECONNREFUSED):
		return socksConnRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return socksNetUnreachable
	case errors.Is(err, syscall.EHOSTUNREACH):
		return socksHostUnreachable
	}
	return socksGeneralFailure
}

// socksReply writes VER REP RSV ATYP BND.ADDR BND.PORT; bound nil or not
// an IP address gives 0.0.0.0:0.
func socksReply(w io.Writer, code byte, bound net.Addr) error {
	var ap netip.AddrPort
	switch a := bound.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case nil:
	default:
		ap, _ = netip.ParseAddrPort(a.String())
	}
	ip := ap.Addr().Unmap()
	b := make([]byte, 0, 22)
	b = append(b, socksVersion, code, 0)
	if ip.Is6() {
		b = append(b, socksATYPIPv6)
		a16 := ip.As16()
		b = append(b, a16[:]...)
	} else {
		b = append(b, socksATYPIPv4)
		if ip.Is4() {
			a4 := ip.As4()
			b = append(b, a4[:]...)
		} else {
			b = append(b, 0, 0, 0, 0)
		}
	}
	b = append(b, byte(ap.Port()>>8), byte(ap.Port()))
	_, err := w.Write(b)
	return err
}
