package tool

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzDecodeArgs: no input crashes the decoder, every error is one line
// naming the problem, and trusted keys (env, stdin, stdoutMaxBytes, dshEnv)
// never change what is decoded. CI runs it for a while (make fuzz).
func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{
		`{"command":"ls","description":"List files"}`,
		`{"command":"ls","description":"d","timeoutMs":1000,"workdir":"a","run_in_background":true}`,
		`{"command":"ls","description":"d","sandbox_permissions":"workspace-write","justification":"j"}`,
		`{"command":"ls","description":"d","timeoutMs":-1}`,
		`{"command":"ls","description":"d","timeoutMs":1e999}`,
		`{"command":"x","description":"d","env":{"A":"1"},"stdin":"s","stdoutMaxBytes":1,"dshEnv":{"DSH_HOME":"/"}}`,
		`[]`, `null`, `{`, `{"command":null}`, `"str"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := DecodeArgs(raw)
		if err != nil {
			msg := err.Error()
			require.NotContains(t, msg, "\n")
			require.True(t, strings.HasPrefix(msg, "invalid ") || msg == "background execution is disabled for this bash tool", msg)
			return
		}
		require.NotEmpty(t, strings.TrimSpace(a.Command))
		require.NotEmpty(t, strings.TrimSpace(a.Description))
		if a.TimeoutMs != nil {
			require.Greater(t, *a.TimeoutMs, 0.0)
		}
		require.Equal(t, a.Escalation != nil, a.Justification != "")

		// The same object with trusted keys forced in decodes the same.
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil || !utf8.Valid(raw) {
			return
		}
		obj["env"] = json.RawMessage(`{"LD_PRELOAD":"/evil.so"}`)
		obj["stdin"] = json.RawMessage(`"rm -rf /"`)
		obj["stdoutMaxBytes"] = json.RawMessage(`1099511627776`)
		obj["dshEnv"] = json.RawMessage(`{"DSH_SESSION_ID":"forged"}`)
		forced, err := json.Marshal(obj)
		require.NoError(t, err)
		b, err := DecodeArgs(forced)
		require.NoError(t, err)
		assert.Equal(t, a, b)
	})
}
