package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		args []string // the command, when accepted
		err  string   // a substring of the error, when refused
	}{
		{"command after --", []string{"--mode", "read-only", "--", "rm", "-rf", "x"}, []string{"rm", "-rf", "x"}, ""},
		{"flags after -- are the command's", []string{"--", "bash", "--network", "--"}, []string{"bash", "--network", "--"}, ""},
		{"--flag=value", []string{"--network=false", "--mode=workspace-write", "--", "true"}, []string{"true"}, ""},
		{"repeatable values keep their commas", []string{"--allow-write", "/a,b", "--", "true"}, []string{"true"}, ""},
		{"boolean given a value", []string{"--network", "false", "--", "echo", "hi"}, nil, `unexpected argument "false"`},
		{"no --", []string{"--mode", "read-only", "rm", "-rf", "x"}, nil, `unexpected argument "rm"`},
		{"missing command", []string{"--mode", "read-only", "--"}, nil, "missing `-- COMMAND"},
		{"nothing", nil, nil, "missing `-- COMMAND"},
		{"unknown flag", []string{"--bogus", "--", "true"}, nil, "unknown flag: --bogus"},
		{"--json without --probe", []string{"--json", "--", "true"}, nil, "--json goes with --probe"},
		{"--probe with more", []string{"--probe", "--quiet"}, nil, "--probe takes only --json"},
		{"--probe with a command", []string{"--probe", "--", "true"}, nil, "--probe takes no COMMAND"},
		{"--timeout 0", []string{"--timeout", "0", "--", "true"}, nil, "--timeout must be a positive duration up to 9223372036854 ms, got 0 ms"},
		{"--timeout 0s", []string{"--timeout", "0s", "--", "true"}, nil, "--timeout must be a positive duration"},
		{"--timeout negative", []string{"--timeout", "-5s", "--", "true"}, nil, "--timeout must be a positive duration"},
		{"--timeout too large", []string{"--timeout", "9223372036854775807", "--", "true"}, nil, "--timeout must be a positive duration"},
		{"--timeout under a millisecond", []string{"--timeout", "10us", "--", "true"}, nil, `"10us": under a millisecond`},
		{"--timeout not a duration", []string{"--timeout", "soon", "--", "true"}, nil, `"soon": want a duration (5s, 1500ms, 2m) or milliseconds`},
		{"--timeout a duration", []string{"--timeout", "1m30s", "--", "true"}, []string{"true"}, ""},
		{"did you mean", []string{"--alow-write", "/x", "--", "true"}, nil, "unknown flag: --alow-write (did you mean --allow-write?)"},
		{"did you mean, a prefix", []string{"--allow-broad", "--", "true"}, nil, "(did you mean --allow-broad-workspace?)"},
		{"--landlock-abi", []string{"--landlock-abi", "2", "--", "true"}, []string{"true"}, ""},
		{"--probe --landlock-abi", []string{"--probe", "--landlock-abi", "5"}, []string{}, ""},
		{"--landlock-abi 0", []string{"--landlock-abi", "0", "--", "true"}, nil, "--landlock-abi must be a Landlock ABI version (1 or more), got 0"},
		{"--landlock-abi negative", []string{"--landlock-abi", "-1", "--", "true"}, nil, "--landlock-abi must be"},
		{"--landlock-abi not a number", []string{"--landlock-abi", "six", "--", "true"}, nil, "--landlock-abi"},
		{"--max-memory", []string{"--max-memory", "256M", "--max-pids", "50", "--max-cpu", "1.5", "--", "true"}, []string{"true"}, ""},
		{"--max-memory 0", []string{"--max-memory", "0", "--", "true"}, []string{"true"}, ""},
		{"--max-memory bad", []string{"--max-memory", "lots", "--", "true"}, nil, `--max-memory: invalid resource limit: size "lots"`},
		{"--max-memory negative", []string{"--max-memory", "-1G", "--", "true"}, nil, "--max-memory"},
		{"--max-pids negative", []string{"--max-pids", "-1", "--", "true"}, nil, "max-pids must not be negative, got -1"},
		{"--max-cpu negative", []string{"--max-cpu", "-2", "--", "true"}, nil, "max-cpu must be a non-negative number of cores"},
		{"--max-cpu not a number", []string{"--max-cpu", "all", "--", "true"}, nil, "--max-cpu"},
		{"--probe with a limit", []string{"--probe", "--max-pids", "5"}, nil, "--probe takes only --json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseArgs(tc.argv)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.True(t, strings.HasPrefix(err.Error(), "usage error: "), err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.args, o.args)
		})
	}
	o, err := parseArgs([]string{"--timeout", "2m", "--", "x"})
	require.NoError(t, err)
	assert.Equal(t, 2*time.Minute, o.timeout())
	o, err = parseArgs([]string{"--allow-write", "/a,b", "--allow-write", "/c", "--timeout", "1500", "--", "x"})
	require.NoError(t, err)
	assert.Equal(t, []string{"/a,b", "/c"}, o.AllowWrite)
	assert.Equal(t, int64(1500), o.timeout().Milliseconds())
	o, err = parseArgs([]string{"--max-memory", "256M", "--max-cpu", "0.5", "--", "x"})
	require.NoError(t, err)
	assert.Equal(t, modes.Limits{MaxPids: modes.DefaultPids, MaxMemory: 256 << 20, MaxCPU: 0.5}, o.Limits, "flags given replace their field, the rest are defaults")
	o, err = parseArgs([]string{"--max-pids", "0", "--max-memory", "0", "--", "x"})
	require.NoError(t, err)
	assert.Equal(t, modes.Limits{}, o.Limits, "0 is unlimited")
	o, err = parseArgs([]string{"--", "x"})
	require.NoError(t, err)
	assert.Equal(t, modes.DefaultLimits(), o.Limits)
	o, err = parseArgs([]string{"--landlock-abi", "4", "--", "x"})
	require.NoError(t, err)
	assert.Equal(t, 4, o.landlockABI)
	for _, h := range []string{"--help", "-h", "--version"} {
		o, err := parseArgs([]string{h})
		require.NoError(t, err, h)
		assert.True(t, o.help || o.version, h)
	}
}

func TestChildEnv(t *testing.T) {
	parent := []string{"PATH=/bin", "OPENAI_API_KEY=sk", "github_token=t", "DSH_HOME=/d", "MONKEY=1", "A=1", "B=2", "A=3"}
	for _, tc := range []struct {
		name string
		argv []string
		want []string
	}{
		{"scrubbed", nil, []string{"PATH=/bin", "A=3", "B=2"}},
		{"keep, unset, set", []string{"--keep-env", "MONKEY", "--unsetenv", "B", "--setenv", "C=x=y", "--setenv", "A=4"},
			[]string{"PATH=/bin", "MONKEY=1", "A=4", "C=x=y"}},
		{"clearenv", []string{"--clearenv", "--keep-env", "PATH", "--setenv", "Z="}, []string{"PATH=/bin", "Z="}},
		{"unset wins over keep", []string{"--keep-env", "MONKEY", "--unsetenv", "MONKEY"}, []string{"PATH=/bin", "A=3", "B=2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseArgs(append(tc.argv, "--", "x"))
			require.NoError(t, err)
			got, err := childEnv(parent, o)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	for _, bad := range [][]string{{"--setenv", "X"}, {"--setenv", "=1"}, {"--keep-env", "A=B"}, {"--unsetenv", ""}} {
		o, err := parseArgs(append(bad, "--", "x"))
		require.NoError(t, err)
		_, err = childEnv(parent, o)
		assert.ErrorContains(t, err, "usage error: "+bad[0], bad)
	}
}

// parseArgs parses argv with an empty environment: no home, so no user
// policy file.
func parseArgs(argv []string) (options, error) {
	return parse(argv, nil)
}

// TestHelpClaimsHold: every flag whose help says what 0 means ("0:
// unlimited") takes 0; every flag whose help names its values in
// parentheses or after "e.g." is checked elsewhere.
func TestHelpClaimsHold(t *testing.T) {
	o, err := parseArgs([]string{"--help"})
	require.NoError(t, err)
	n := 0
	o.flags.VisitAll(func(f *pflag.Flag) {
		if !strings.Contains(f.Usage, "0: ") {
			return
		}
		n++
		_, err := parseArgs([]string{"--" + f.Name, "0", "--", "true"})
		assert.NoError(t, err, "--%s's help says what 0 means: %q", f.Name, f.Usage)
	})
	assert.Positive(t, n, "no flag's help mentions 0")
}
