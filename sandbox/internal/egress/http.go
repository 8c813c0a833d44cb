package egress

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"
)

// notAProxyRequest answers an origin-form request.
const notAProxyRequest = "dsh-sandbox: this is the dsh-sandbox egress proxy; it serves proxy requests only (CONNECT host:port, or an absolute http:// URL)\n"

type targetKey struct{}

// serveHTTP is the handler of the Proxy's http.Server.
func serveHTTP(w http.ResponseWriter, r *http.Request) {
	c := r.Context().Value(connKey{}).(*clientConn)
	sv := c.sv
	if r.Method == http.MethodConnect {
		sv.serveConnect(w, r, c)
		return
	}
	if !r.URL.IsAbs() || r.URL.Host == "" {
		plainText(w, http.StatusBadRequest, notAProxyRequest)
		return
	}
	if r.URL.Scheme != "http" {
		plainText(w, http.StatusBadRequest, "dsh-sandbox: the egress proxy forwards http:// URLs only; use CONNECT for "+r.URL.Scheme+"\n")
		return
	}
	t, err := parseAuthority(r.URL.Host, 80)
	if err != nil {
		plainText(w, http.StatusBadRequest, "dsh-sandbox: "+err.Error()+": "+r.URL.Host+"\n")
		return
	}
	if c.adm == overQuota {
		sv.refuseOverLimit(w, sv.overLimit(t, "http"))
		return
	}
	// The name is checked on every request (a pooled upstream connection
	// skips the dial, which checks the addresses).
	if d := sv.checkName(t, "http"); d != nil {
		sv.refuse(w, d.d)
		return
	}
	sv.reverseProxy().ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, t)))
}

// serveConnect checks and dials the CONNECT destination, then hijacks the
// connection and relays the raw connections.
func (sv *Served) serveConnect(w http.ResponseWriter, r *http.Request, c *clientConn) {
	t, err := parseAuthority(r.Host, 0)
	if err != nil {
		plainText(w, http.StatusBadRequest, "dsh-sandbox: "+err.Error()+": "+r.Host+"\n")
		return
	}
	if c.adm == overQuota {
		sv.refuseOverLimit(w, sv.overLimit(t, "connect"))
		return
	}
	up, err := sv.dialTarget(r.Context(), t, "connect")
	if err != nil {
		sv.httpError(w, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		sv.dropUp(up)
		plainText(w, http.StatusInternalServerError, "dsh-sandbox: cannot take over the connection\n")
		return
	}
	_, brw, err := hj.Hijack()
	if err != nil {
		sv.dropUp(up)
		return
	}
	defer c.release()
	defer sv.dropUp(up)
	raw := c.Conn
	raw.SetDeadline(time.Time{})
	if _, err := io.WriteString(raw, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// What the client sent after its request (a TLS ClientHello, say) is
	// in net/http's buffer: pass it on, then relay the raw connections.
	if len(c.pre) > 0 {
		if _, err := up.Write(c.pre); err != nil {
			return
		}
		c.pre = nil
	}
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	sv.relay(raw, up)
}

// refuse answers a denial with a 403 and reports it.
func (sv *Served) refuse(w http.ResponseWriter, d Denial) {
	sv.report(d)
	w.Header().Set("X-Dsh-Sandbox-Denied", d.Address())
	plainText(w, http.StatusForbidden, d.message(sv.s.Mode))
}

// refuseOverLimit answers a connection over the Quota with a 503, closes
// it after the answer, and reports d.
func (sv *Served) refuseOverLimit(w http.ResponseWriter, d Denial) {
	sv.report(d)
	w.Header().Set("X-Dsh-Sandbox-Denied", d.Address())
	w.Header().Set("Connection", "close")
	plainText(w, http.StatusServiceUnavailable, d.message(sv.s.Mode))
}

// httpError answers a failed dialTarget.
func (sv *Served) httpError(w http.ResponseWriter, err error) {
	var de *deniedError
	if errors.As(err, &de) {
		sv.refuse(w, de.d)
		return
	}
	var ue *upstreamError
	if errors.As(err, &ue) {
		w.Header().Set("X-Dsh-Sandbox-Upstream-Refused", ue.status)
	}
	plainText(w, http.StatusBadGateway, "dsh-sandbox: "+err.Error()+"\n")
}

func plainText(w http.ResponseWriter, code int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	io.WriteString(w, body)
}

// reverseProxy returns the plain-HTTP forwarder of sv, made the first time:
// one Transport per Served, so no upstream connection is shared between
// sessions, whose dials are checked ones.
func (sv *Served) reverseProxy() *httputil.ReverseProxy {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.rp != nil {
		return sv.rp
	}
	sv.tr = &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			t, err := parseAuthority(addr, 0)
			if err != nil {
				return nil, err
			}
			c, err := sv.dialTarget(ctx, t, "http")
			if err != nil {
				return nil, err
			}
			return &upConn{Conn: c, sv: sv}, nil
		},
		DisableCompression:    true, // pass Content-Encoding through as it is
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	sv.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(targetKey{}).(target)
			pr.Out.URL.Host = t.String()
			for k := range pr.Out.Header {
				if strings.HasPrefix(k, "Proxy-") {
					delete(pr.Out.Header, k)
				}
			}
		},
		Transport:     sv.tr,
		BufferPool:    bufferPool{sv.p},
		FlushInterval: -1, // stream: every write is flushed to the client
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			sv.httpError(w, err)
		},
	}
	return sv.rp
}

// upConn is a pooled upstream connection of the Transport: closing it
// forgets it in sv.
type upConn struct {
	net.Conn
	sv *Served
}

func (c *upConn) Close() error {
	c.sv.dropUp(c.Conn)
	return nil
}
