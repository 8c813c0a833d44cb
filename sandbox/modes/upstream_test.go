package modes

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUpstreamFromEnv(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		https    string // the URL in full ("" none)
		http     string
		noProxy  string
		json     string // the report's form
		errMatch string
	}{
		{name: "none", env: map[string]string{"NO_PROXY": "x"}},
		{name: "https with credentials", env: map[string]string{"HTTPS_PROXY": "http://u:s3cret@10.0.0.1:3128", "NO_PROXY": ".corp,10.0.0.0/8"},
			https: "http://u:s3cret@10.0.0.1:3128", noProxy: ".corp,10.0.0.0/8",
			json: `{"https":"http://10.0.0.1:3128","noProxy":".corp,10.0.0.0/8"}`},
		{name: "lower case, no scheme", env: map[string]string{"http_proxy": "proxy:8080", "no_proxy": "*"},
			http: "http://proxy:8080", noProxy: "*", json: `{"http":"http://proxy:8080","noProxy":"*"}`},
		{name: "upper case first", env: map[string]string{"HTTPS_PROXY": "http://a:1", "https_proxy": "http://b:1"},
			https: "http://a:1", json: `{"https":"http://a:1"}`},
		{name: "ALL_PROXY for both", env: map[string]string{"ALL_PROXY": "https://p:443"},
			https: "https://p:443", http: "https://p:443", json: `{"https":"https://p:443","http":"https://p:443"}`},
		{name: "socks refused, the value not repeated", env: map[string]string{"ALL_PROXY": "socks5://u:s3cret@p:1080"},
			errMatch: "ALL_PROXY: the egress proxy chains to http:// and https:// proxies only, not socks5://"},
		{name: "a path", env: map[string]string{"HTTPS_PROXY": "http://p:1/x"}, errMatch: "HTTPS_PROXY: want a proxy URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := UpstreamFromEnv(func(k string) string { return tc.env[k] })
			if tc.errMatch != "" {
				require.Error(t, err)
				assert.True(t, errors.Is(err, ErrAllowlist))
				assert.Contains(t, err.Error(), tc.errMatch)
				assert.NotContains(t, err.Error(), "s3cret")
				return
			}
			require.NoError(t, err)
			if tc.https == "" && tc.http == "" {
				assert.Nil(t, u)
				return
			}
			str := func(p interface{ String() string }, isNil bool) string {
				if isNil {
					return ""
				}
				return p.String()
			}
			assert.Equal(t, tc.https, str(u.HTTPS, u.HTTPS == nil))
			assert.Equal(t, tc.http, str(u.HTTP, u.HTTP == nil))
			assert.Equal(t, tc.noProxy, u.NoProxy)
			b, err := json.Marshal(Allowlist{Domains: []string{"a.test"}, Upstream: u})
			require.NoError(t, err)
			assert.Equal(t, `{"domains":["a.test"],"upstream":`+tc.json+`}`, string(b))
			assert.NotContains(t, string(b), "s3cret")
			var back Allowlist
			require.NoError(t, json.Unmarshal(b, &back))
			assert.Equal(t, tc.noProxy, back.Upstream.NoProxy)
		})
	}
}
