package modes

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// Upstream is the caller's proxy, which the egress proxy goes through to
// reach an allowed destination: HTTPS for CONNECT and SOCKS5 tunnels, HTTP
// for plain-HTTP requests (tunnelled with CONNECT too), unless NoProxy (a
// NO_PROXY value) excludes the destination. A nil URL means direct. The
// schemes are http and https; user:password in a URL is sent to that
// proxy as Proxy-Authorization and never reaches the command. The library
// takes it as given; the CLI and the MCP server fill it from their
// environment (UpstreamFromEnv).
//
// Its JSON (in reports) has the URLs without their credentials.
type Upstream struct {
	HTTPS   *url.URL
	HTTP    *url.URL
	NoProxy string
}

// MarshalJSON writes {"https": "http://proxy:3128", "http": ...,
// "noProxy": ...}, without user information.
func (u Upstream) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		HTTPS   string `json:"https,omitempty"`
		HTTP    string `json:"http,omitempty"`
		NoProxy string `json:"noProxy,omitempty"`
	}{redact(u.HTTPS), redact(u.HTTP), u.NoProxy})
}

func redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// UpstreamFromEnv is the upstream proxy getenv names: HTTPS_PROXY (or
// https_proxy), HTTP_PROXY (or http_proxy), each falling back to
// ALL_PROXY (or all_proxy), and NO_PROXY (or no_proxy); nil when none is
// set. A value without a scheme is an http:// one. A scheme the egress
// proxy cannot chain to (socks5://, say) is an error wrapping
// ErrAllowlist.
func UpstreamFromEnv(getenv func(string) string) (*Upstream, error) {
	get := func(names ...string) (string, string) {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return n, v
			}
		}
		return "", ""
	}
	var u Upstream
	for _, s := range []struct {
		dst   **url.URL
		names []string
	}{
		{&u.HTTPS, []string{"HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"}},
		{&u.HTTP, []string{"HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"}},
	} {
		name, v := get(s.names...)
		if v == "" {
			continue
		}
		p, err := parseProxyURL(v)
		if err != nil {
			// The value may hold a password: name the variable only.
			return nil, fmt.Errorf("%w: %s: %w", ErrAllowlist, name, err)
		}
		*s.dst = p
	}
	if u.HTTPS == nil && u.HTTP == nil {
		return nil, nil
	}
	_, u.NoProxy = get("NO_PROXY", "no_proxy")
	return &u, nil
}

func parseProxyURL(v string) (*url.URL, error) {
	if !strings.Contains(v, "://") {
		v = "http://" + v
	}
	p, err := url.Parse(v)
	if err != nil {
		return nil, fmt.Errorf("not a proxy URL")
	}
	if p.Scheme != "http" && p.Scheme != "https" {
		return nil, fmt.Errorf("the egress proxy chains to http:// and https:// proxies only, not %s://", p.Scheme)
	}
	if p.Hostname() == "" || (p.Path != "" && p.Path != "/") || p.RawQuery != "" {
		return nil, fmt.Errorf("want a proxy URL SCHEME://[USER:PASSWORD@]HOST[:PORT]")
	}
	return &url.URL{Scheme: p.Scheme, User: p.User, Host: p.Host}, nil
}

// UnmarshalJSON reads what MarshalJSON writes (so without credentials).
func (u *Upstream) UnmarshalJSON(b []byte) error {
	var v struct {
		HTTPS   string `json:"https"`
		HTTP    string `json:"http"`
		NoProxy string `json:"noProxy"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	out := Upstream{NoProxy: v.NoProxy}
	for _, s := range []struct {
		in  string
		dst **url.URL
	}{{v.HTTPS, &out.HTTPS}, {v.HTTP, &out.HTTP}} {
		if s.in == "" {
			continue
		}
		p, err := parseProxyURL(s.in)
		if err != nil {
			return fmt.Errorf("upstream: %w", err)
		}
		*s.dst = p
	}
	*u = out
	return nil
}
